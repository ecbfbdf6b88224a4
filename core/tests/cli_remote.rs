//! The command-line tool with remote slides: a URL it refuses, and Ctrl-C while it waits for a
//! server that never answers.
#![cfg(feature = "remote")]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `info` with a URL past the HTTP client's limit made object_store panic inside the HEAD
/// ("error: internal error (please report): request must be valid: InvalidUri(TooLong)"). It
/// is now a usage error: one line naming the limit, exit 1.
#[test]
fn a_url_too_long_is_a_one_line_usage_error() {
    let url = format!("http://127.0.0.1:9/{}.svs", "a".repeat(66_000));
    let out = Command::new(env!("CARGO_BIN_EXE_slidestream")).args(["info", &url]).env("RUST_BACKTRACE", "0").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: http://127.0.0.1:9/aaa") && err.contains("at most 8192"), "{err}");
    assert!(!err.contains("internal error"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_slidestream")).args(["info", "http://127.0.0.1:9/a\nb.svs"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!((out.status.code(), err.lines().count()), (Some(1), 1), "{err}");
    assert!(err.contains("not accepted"), "{err}");
}

/// Ctrl-C during `info URL` whose server accepts the connection and never answers: before, the
/// command either waited for the request timeout or was killed by the signal (no exit status,
/// no message). It now stops at once: "error: interrupted", exit 130.
#[test]
fn ctrl_c_during_a_remote_wait_exits_130() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().flatten() {
            held.push(c); // kept open, never answered
            let _ = tx.send(());
        }
    });
    let mut child = Command::new(env!("CARGO_BIN_EXE_slidestream"))
        .args(["info", &format!("http://127.0.0.1:{port}/x.svs")])
        .env("SLIDESTREAM_REMOTE_TIMEOUT_MS", "600000")
        .env("SLIDESTREAM_REMOTE_RETRIES", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command is inside its HEAD once the server has its connection.
    if rx.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        panic!("slidestream never connected");
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("slidestream info still waiting 60 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{:?} {err}", out.status);
    assert_eq!(err.trim_end(), "error: interrupted");
}
