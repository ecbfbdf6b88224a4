//! `slidestream serve`: one slide or a directory of slides over HTTP — the IIIF Image API 3.0,
//! Deep Zoom, a JSON catalogue and a viewer page. The URL layout, options and status codes are
//! documented in `docs/serve.md`.
//!
//! axum on a tokio runtime; every request that reads pixels runs on the blocking pool, at most
//! `--max-requests` at once (a semaphore), and at most 64 × that many wait (`503` beyond).
//! Decoded tiles are kept in the process's shared host tile cache (`--cache-mb`).

mod catalog;
mod http;
mod iiif;
mod render;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use axum::Router;
use slidestream::deepzoom::DeepZoom;
use slidestream::Error;
use tokio::sync::Semaphore;

use catalog::{Catalog, Entry};
use http::HttpError;
use iiif::{Format, Policy};

/// Viewer files, built into the binary (assets/viewer/).
const INDEX_HTML: &str = include_str!("../../../../../assets/viewer/index.html");
const VIEWER_JS: &str = include_str!("../../../../../assets/viewer/viewer.js");
const VIEWER_CSS: &str = include_str!("../../../../../assets/viewer/viewer.css");

/// Options of `slidestream serve` (validated by the argument parser).
pub(crate) struct ServeOptions {
    pub path: PathBuf,
    pub host: String,
    pub port: u16,
    pub tile_size: u32,
    pub overlap: u32,
    pub limit_bounds: bool,
    pub jpeg_quality: u8,
    pub max_requests: usize,
    pub allow_upscale: bool,
    pub max_area: u64,
}

struct AppState {
    catalog: Catalog,
    opts: ServeOptions,
    policy: Policy,
    permits: Semaphore,
    waiting: AtomicUsize,
}

/// Run the server until interrupted (Ctrl-C / SIGTERM ends it).
///
/// # Errors
/// [`Error::Usage`] for a path that is neither a slide nor a directory, or an address that
/// cannot be bound; [`Error::Io`] when the runtime cannot start.
pub(crate) fn serve(opts: ServeOptions) -> Result<(), Error> {
    let catalog = Catalog::scan(&opts.path)?;
    let policy = Policy { max_area: opts.max_area, allow_upscale: opts.allow_upscale };
    let permits = Semaphore::new(opts.max_requests);
    let addr = format!("{}:{}", opts.host, opts.port);
    let state = Arc::new(AppState { catalog, opts, policy, permits, waiting: AtomicUsize::new(0) });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(state.opts.max_requests + 4)
        .enable_all()
        .build()
        .map_err(|e| Error::io(&slidestream::Location::file("tokio runtime"), e))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|e| Error::Usage(format!("cannot listen on {addr}: {e}")))?;
        let local: SocketAddr = listener.local_addr().map_err(|e| Error::Usage(format!("{addr}: {e}")))?;
        let n = state.catalog.entries().len();
        for (name, err) in &state.catalog.errors {
            eprintln!("slidestream serve: not served: {name}: {err}");
        }
        println!("slidestream serve: listening on http://{local}/ ({n} slides)");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let app = Router::new().fallback(handle).with_state(state);
        axum::serve(listener, app).with_graceful_shutdown(shutdown()).await.map_err(|e| Error::Usage(format!("server: {e}")))
    })
}

async fn shutdown() {
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// Every request: CORS on every answer, GET and HEAD only.
async fn handle(State(state): State<Arc<AppState>>, req: Request<Body>) -> Response<Body> {
    let method = req.method().clone();
    let mut resp = if method != Method::GET && method != Method::HEAD {
        let mut r = HttpError::new(405, format!("method {method} is not allowed (GET, HEAD)")).into_response();
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        r
    } else {
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost").to_string();
        match route(&state, &path, &query, &host, req.headers()).await {
            Ok(r) => r,
            Err(e) => e.into_response(),
        }
    };
    resp.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    if method == Method::HEAD {
        *resp.body_mut() = Body::empty();
    }
    resp
}

/// Run `f` on the blocking pool under the request bound.
async fn blocking<T: Send + 'static>(state: &Arc<AppState>, f: impl FnOnce(&AppState) -> Result<T, HttpError> + Send + 'static) -> Result<T, HttpError> {
    let limit = state.opts.max_requests.saturating_mul(64);
    if state.waiting.fetch_add(1, Ordering::SeqCst) >= limit {
        state.waiting.fetch_sub(1, Ordering::SeqCst);
        return Err(HttpError::new(503, format!("more than {limit} requests are waiting; try again")));
    }
    let permit = state.permits.acquire().await;
    state.waiting.fetch_sub(1, Ordering::SeqCst);
    let _permit = permit.map_err(|_| HttpError::new(503, "the server is shutting down".into()))?;
    let st = Arc::clone(state);
    tokio::task::spawn_blocking(move || f(&st)).await.map_err(|e| HttpError::new(500, format!("request failed: {e}")))?
}

fn segments(path: &str) -> Vec<&str> {
    path.trim_start_matches('/').split('/').collect()
}

fn query_size(query: &str) -> Result<u64, HttpError> {
    for pair in query.split('&') {
        if let Some(v) = pair.strip_prefix("size=") {
            return match v.parse::<u64>() {
                Ok(n) if (8..=2048).contains(&n) => Ok(n),
                _ => Err(HttpError::new(400, format!("size={v}: expected an integer from 8 to 2048"))),
            };
        }
    }
    Ok(512)
}

/// The slide's tag for `ETag`s: its quickhash, else its path.
fn slide_hash(slide: &slidestream::Slide, entry: &Entry) -> String {
    slide.properties().get("openslide.quickhash-1").cloned().unwrap_or_else(|| entry.path.display().to_string())
}

/// An image answer, `304` when the client holds it already.
async fn image(
    state: &Arc<AppState>,
    raw_id: &str,
    path: &str,
    headers: &HeaderMap,
    format: Format,
    f: impl FnOnce(&slidestream::Slide, &str) -> Result<render::Pixels, HttpError> + Send + 'static,
) -> Result<Response<Body>, HttpError> {
    let (id, entry) = state.catalog.lookup(raw_id)?;
    let entry = entry.clone();
    let slide = {
        let st = Arc::clone(state);
        let (id, entry) = (id.clone(), entry.clone());
        tokio::task::spawn_blocking(move || st.catalog.slide(&id, &entry)).await.map_err(|e| HttpError::new(500, e.to_string()))??
    };
    let tag = http::etag(&slide_hash(&slide, &entry), path);
    if http::not_modified(headers, &tag) {
        return Ok(http::not_modified_response(&tag));
    }
    let quality = state.opts.jpeg_quality;
    let bytes = blocking(state, move |_| {
        let px = f(&slide, &entry.name)?;
        render::encode(&px, format, quality)
    })
    .await?;
    Ok(http::cacheable(http::ok(format.mime(), bytes), &tag))
}

async fn route(state: &Arc<AppState>, path: &str, query: &str, host: &str, headers: &HeaderMap) -> Result<Response<Body>, HttpError> {
    let seg = segments(path);
    match seg.as_slice() {
        [""] => Ok(http::ok("text/html; charset=utf-8", INDEX_HTML.as_bytes().to_vec())),
        ["static", "viewer.js"] => Ok(http::ok("text/javascript; charset=utf-8", VIEWER_JS.as_bytes().to_vec())),
        ["static", "viewer.css"] => Ok(http::ok("text/css; charset=utf-8", VIEWER_CSS.as_bytes().to_vec())),
        ["slides.json"] => Ok(http::json(&slides_json(state))),
        ["slides", id, "info.json"] => {
            let (id, entry) = state.catalog.lookup(id)?;
            let (id2, entry2) = (id.clone(), entry.clone());
            let v = blocking(state, move |st| {
                let slide = st.catalog.slide(&id2, &entry2)?;
                Ok(info_json(&id2, &entry2, &slide))
            })
            .await?;
            Ok(http::json(&v))
        }
        ["slides", id, "associated", file] => {
            let (which, format) = split_ext(file, &[("png", Format::Png), ("jpg", Format::Jpg)])?;
            let which = percent_encoding::percent_decode_str(which).decode_utf8_lossy().into_owned();
            image(state, id, path, headers, format, move |s, name| render::associated(s, name, &which)).await
        }
        ["slides", id, file] if file.starts_with("thumbnail.") => {
            let (_, format) = split_ext(file, &[("png", Format::Png), ("jpg", Format::Jpg)])?;
            let size = query_size(query)?;
            let p = format!("{path}?size={size}");
            image(state, id, &p, headers, format, move |s, name| render::thumbnail(s, name, size)).await
        }
        ["slides", id, "tissue.png"] => {
            let size = query_size(query)?;
            let p = format!("{path}?size={size}");
            image(state, id, &p, headers, Format::Png, move |s, name| render::tissue(s, name, size)).await
        }
        ["iiif", "3", id] => {
            state.catalog.lookup(id)?;
            let to = format!("/iiif/3/{id}/info.json");
            let mut r = Response::new(Body::from(format!("see {to}\n")));
            *r.status_mut() = StatusCode::SEE_OTHER;
            r.headers_mut().insert(header::LOCATION, HeaderValue::from_str(&to).map_err(|e| HttpError::new(400, e.to_string()))?);
            Ok(r)
        }
        ["iiif", "3", id, "info.json"] => {
            let (id, entry) = state.catalog.lookup(id)?;
            let (id2, entry2) = (id.clone(), entry.clone());
            let base = format!("http://{host}/iiif/3/{id}");
            let policy = state.policy;
            let v = blocking(state, move |st| {
                let slide = st.catalog.slide(&id2, &entry2)?;
                let (w, h) = slide.dimensions();
                let max_read = policy.max_area.saturating_mul(4);
                Ok(iiif::info_json(&base, w, h, policy, |f| render::tile_scale_served(&slide, f, iiif::TILE, max_read)))
            })
            .await?;
            let mut r = http::ok("application/ld+json;profile=\"http://iiif.io/api/image/3/context.json\"", v.to_string().into_bytes());
            r.headers_mut().insert(header::LINK, HeaderValue::from_static("<http://iiif.io/api/image/3/level2.json>;rel=\"profile\""));
            Ok(r)
        }
        ["iiif", "3", id, region, size, rotation, qf] => {
            let (rid, entry) = state.catalog.lookup(id)?;
            let entry = entry.clone();
            let st = Arc::clone(state);
            let dims = tokio::task::spawn_blocking(move || st.catalog.slide(&rid, &entry).map(|s| s.dimensions()))
                .await
                .map_err(|e| HttpError::new(500, e.to_string()))??;
            // Clients may percent-encode the parameters (`%5E` for `^`, `%2C` for `,`).
            let dec = |p: &str| percent_encoding::percent_decode_str(p).decode_utf8_lossy().into_owned();
            let (region, size, rotation, qf) = (dec(region), dec(size), dec(rotation), dec(qf));
            let req = iiif::parse_request([&region, &size, &rotation, &qf], dims.0, dims.1, state.policy)?;
            let max_read = state.policy.max_area.saturating_mul(4);
            let format = req.format;
            image(state, id, path, headers, format, move |s, name| render::iiif_image(s, name, &req, max_read)).await
        }
        ["deepzoom", file] if file.ends_with(".dzi") => {
            let id = &file[..file.len() - 4];
            let (id, entry) = state.catalog.lookup(id)?;
            let (tile, overlap, bounds) = (state.opts.tile_size, state.opts.overlap, state.opts.limit_bounds);
            let (id2, entry2) = (id.clone(), entry.clone());
            let dzi = blocking(state, move |st| {
                let slide = st.catalog.slide(&id2, &entry2)?;
                let dz = DeepZoom::new(&slide, tile, overlap, bounds).map_err(|e| HttpError::from_read(&entry2.name, &e))?;
                Ok(dz.dzi("jpeg"))
            })
            .await?;
            Ok(http::ok("application/xml", dzi.into_bytes()))
        }
        ["deepzoom", dir, level, file] if dir.ends_with("_files") => {
            let id = &dir[..dir.len() - 6];
            let level: usize = level.parse().map_err(|_| HttpError::new(404, format!("no Deep Zoom level {level:?}")))?;
            let (stem, format) = split_ext(file, &[("jpeg", Format::Jpg), ("png", Format::Png)])?;
            let (c, r) = stem.split_once('_').ok_or_else(|| HttpError::new(404, format!("no tile {stem:?}: expected COL_ROW")))?;
            let (col, row): (u64, u64) = match (c.parse(), r.parse()) {
                (Ok(c), Ok(r)) => (c, r),
                _ => return Err(HttpError::new(404, format!("no tile {stem:?}: expected COL_ROW"))),
            };
            let (tile, overlap, bounds) = (state.opts.tile_size, state.opts.overlap, state.opts.limit_bounds);
            let max_read = state.policy.max_area.saturating_mul(4);
            image(state, id, path, headers, format, move |s, name| {
                let dz = DeepZoom::new(s, tile, overlap, bounds).map_err(|e| HttpError::from_read(name, &e))?;
                render::dz_tile(s, name, &dz, level, col, row, max_read)
            })
            .await
        }
        _ => Err(HttpError::new(404, format!("nothing at {path}"))),
    }
}

/// `name.ext` split into the name and the format its extension names.
fn split_ext<'a>(file: &'a str, allowed: &[(&str, Format)]) -> Result<(&'a str, Format), HttpError> {
    let (stem, ext) = file.rsplit_once('.').ok_or_else(|| HttpError::new(404, format!("{file:?}: no image format extension")))?;
    allowed.iter().find(|(e, _)| *e == ext).map(|&(_, f)| (stem, f)).ok_or_else(|| {
        let names: Vec<&str> = allowed.iter().map(|(e, _)| *e).collect();
        HttpError::new(400, format!("{file:?}: format {ext:?} is not served here ({})", names.join(", ")))
    })
}

fn slides_json(state: &AppState) -> serde_json::Value {
    let slides: Vec<&serde_json::Value> = state.catalog.entries().values().map(|e| &e.summary).collect();
    let errors: Vec<serde_json::Value> = state.catalog.errors.iter().map(|(n, e)| serde_json::json!({"name": n, "error": e})).collect();
    serde_json::json!({"slides": slides, "errors": errors})
}

fn info_json(id: &str, entry: &Entry, s: &slidestream::Slide) -> serde_json::Value {
    let props = s.properties();
    let power = props.get("openslide.objective-power").and_then(|v| v.parse::<f64>().ok());
    serde_json::json!({
        "id": id, "name": entry.name, "vendor": entry.vendor,
        "dimensions": [s.dimensions().0, s.dimensions().1],
        "level_count": s.level_count(),
        "level_dimensions": s.level_dimensions().iter().map(|&(w, h)| [w, h]).collect::<Vec<_>>(),
        "level_downsamples": s.level_downsamples(),
        "level_tile_sizes": s.level_tile_sizes().iter().map(|&(w, h)| [w, h]).collect::<Vec<_>>(),
        "mpp": s.mpp().map(|m| [m.0, m.1]),
        "objective_power": power,
        "quickhash": props.get("openslide.quickhash-1"),
        "properties": props,
        "associated": s.associated_images().iter().map(|(k, &(w, h))| (k.clone(), serde_json::json!([w, h]))).collect::<serde_json::Map<_, _>>(),
    })
}
