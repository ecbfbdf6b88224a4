//! Unit tests of the remote source: URL checks, interruptible waits, stale objects.

use super::*;

fn net() -> NetOptions {
    NetOptions { retries: 0, timeout: std::time::Duration::from_secs(1) }
}

#[test]
fn urls_and_paths() {
    for u in ["s3://b/k.svs", "S3://b/k", "gs://b/k", "az://c/b", "abfss://c@a.dfs.core.windows.net/b", "http://h/x", "https://h:8443/a/b.tiff"] {
        assert!(is_url(u), "{u}");
    }
    for p in ["/data/s.svs", "s.svs", "file://x", "s3://", "C:/x", "ftp://h/x", "relative/s3://x"] {
        assert!(!is_url(p), "{p}");
    }
}

#[test]
fn options_are_checked_at_build() {
    let mut o = StorageOptions::new();
    o.insert("endpoint".into(), "http://127.0.0.1:9".into());
    o.insert("anonymous".into(), "true".into());
    assert!(store::build("s3://bucket/key.svs", &o, net()).is_ok());
    o.insert("no_such_key".into(), "1".into());
    let e = store::build("s3://bucket/key.svs", &o, net()).unwrap_err();
    assert!(matches!(e, Error::Usage(_)) && e.to_string().contains("no_such_key"), "{e}");
    let e = store::build("s3://bucket", &StorageOptions::new(), net()).unwrap_err();
    assert!(matches!(e, Error::Usage(_)), "a bucket without a key: {e}");
    let e = store::build("http://h:1/x", &[("region".to_string(), "x".to_string())].into(), net()).unwrap_err();
    assert!(e.to_string().contains("\"region\""), "an S3 key for HTTP: {e}");
    assert!(store::build("https://example.org/a.svs", &StorageOptions::new(), net()).is_ok());
}

/// A URL past the HTTP client's URI limit made object_store panic ("request must be
/// valid: InvalidUri(TooLong)") at the HEAD; such URLs, keys too long for an object store
/// and URLs with control characters or whitespace are usage errors before any request.
#[test]
fn urls_are_checked_before_the_client_sees_them() {
    let usage = |url: &str, opts: &StorageOptions| match store::build(url, opts, net()) {
        Err(Error::Usage(m)) => m,
        other => panic!("{}: {:?}", &url[..url.len().min(60)], other.map(|_| ())),
    };
    let none = StorageOptions::new();
    let m = usage(&format!("http://127.0.0.1:9/{}.svs", "a".repeat(66_000)), &none);
    assert!(m.contains("66023 bytes") && m.len() < 300, "{m}");
    usage(&format!("https://h/{}", "a".repeat(store::MAX_URL_BYTES)), &none);
    // Percent-encoding counts: 3000 'é' are 6000 bytes as given, 18000 as sent.
    usage(&format!("https://h/{}", "é".repeat(3000)), &none);
    usage(&format!("s3://b/{}", "k".repeat(store::MAX_KEY_BYTES + 1)), &none);
    assert!(store::build(&format!("s3://b/{}", "k".repeat(store::MAX_KEY_BYTES)), &none, net()).is_ok());
    for bad in ["http://h/a\nb.svs", "http://h/a\tb.svs", " http://h/a.svs", "s3://b/a b.svs", "s3://b/a\u{7f}.svs", "s3://b/a\u{85}.svs"] {
        assert!(usage(bad, &none).contains("not accepted"), "{bad:?}");
    }
    let long_endpoint: StorageOptions = [("endpoint".to_string(), format!("http://h/{}", "e".repeat(70_000)))].into();
    usage("s3://b/k.svs", &long_endpoint);
    assert!(store::build("s3://b/a%20b.svs", &none, net()).is_ok(), "a space written %20");
    // Nothing panics on the way: the open itself gives the same usage error.
    let opts = RemoteOptions { net: net(), concurrency: 4, readahead_bytes: 1 << 16, index_cache: None };
    let e = RemoteSource::open(&format!("http://127.0.0.1:9/{}.svs", "a".repeat(66_000)), &none, opts).unwrap_err();
    assert!(matches!(e, Error::Usage(_)), "{e}");
}

#[test]
fn errors_keep_their_kind() {
    let src = || Box::new(io::Error::other("x")) as Box<dyn std::error::Error + Send + Sync>;
    let nf = object_store::Error::NotFound { path: "k".into(), source: src() };
    assert_eq!(to_io(nf).kind(), io::ErrorKind::NotFound);
    let pd = object_store::Error::PermissionDenied { path: "k".into(), source: src() };
    assert_eq!(to_io(pd).kind(), io::ErrorKind::PermissionDenied);
    let pre = object_store::Error::Precondition { path: "k".into(), source: src() };
    assert_eq!(to_io(pre).kind(), io::ErrorKind::StaleNetworkFileHandle);
    let g = object_store::Error::Generic { store: "S3", source: src() };
    assert_eq!(to_io(g).kind(), io::ErrorKind::Other);
}

#[test]
fn a_refused_connection_is_a_typed_error_not_a_hang() {
    // Port 9 on loopback: nothing listens; the HEAD fails at once with no retry.
    let opts = RemoteOptions { net: net(), concurrency: 4, readahead_bytes: 1 << 16, index_cache: None };
    let e = RemoteSource::open("http://127.0.0.1:9/x.svs", &StorageOptions::new(), opts).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    assert!(e.to_string().starts_with("http://127.0.0.1:9/x.svs"), "{e}");
}

/// A server on loopback that answers HEAD (1 MB, an ETag) when `head` is set and never
/// answers anything else: each connection is kept open, unanswered.
fn stalling_server(head: bool) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    if head && buf.starts_with(b"HEAD ") {
                        let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\nETag: \"e1\"\r\nAccept-Ranges: bytes\r\n\r\n");
                    }
                }
            });
        }
    });
    port
}

/// `f` on another thread with this interrupt flag set, bounded: a wait that the check
/// does not stop is a failure at 30 s, not a stuck test run.
fn interrupted_within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        crate::interrupt::testing::interrupt_this_thread(true);
        let _ = tx.send(f());
        crate::interrupt::testing::interrupt_this_thread(false);
    });
    rx.recv_timeout(std::time::Duration::from_secs(30)).expect("the remote wait was not interrupted (30 s)")
}

fn slow() -> RemoteOptions {
    // Each attempt may wait 120 s: only the interrupt check can end these waits in time.
    RemoteOptions { net: NetOptions { retries: 0, timeout: std::time::Duration::from_secs(120) }, concurrency: 4, readahead_bytes: 1 << 16, index_cache: None }
}

#[test]
fn a_head_that_never_answers_is_interrupted() {
    let url = format!("http://127.0.0.1:{}/x.svs", stalling_server(false));
    let r = interrupted_within(move || RemoteSource::open(&url, &StorageOptions::new(), slow()).map(|_| ()));
    assert!(matches!(r, Err(Error::Interrupted)), "{r:?}");
}

#[test]
fn a_get_that_never_answers_is_interrupted() {
    let url = format!("http://127.0.0.1:{}/x.svs", stalling_server(true));
    let src = RemoteSource::open(&url, &StorageOptions::new(), slow()).unwrap();
    assert_eq!(src.len(), 1_000_000);
    let src = Arc::new(src);
    // A structure read of the open (through the readahead blocks) ...
    let s = src.clone();
    let e = interrupted_within(move || s.read_exact_at(&mut [0u8; 100], 0)).unwrap_err();
    assert!(matches!(Error::io(&Location::file("x"), e), Error::Interrupted));
    // ... and a batch of tile reads after it.
    src.end_open();
    let s = src.clone();
    let r = interrupted_within(move || {
        let (mut a, mut b) = ([0u8; 10], [0u8; 10]);
        s.read_many(&mut [(&mut a[..], 0), (&mut b[..], 5000)]).unwrap()
    });
    assert_eq!(r.len(), 2);
    for e in r {
        assert!(matches!(Error::io_shared(&Location::file("x"), &e.unwrap_err()), Error::Interrupted));
    }
}
