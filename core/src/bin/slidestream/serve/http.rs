//! HTTP answers of the server: the error type every handler returns, and the headers every
//! answer carries (CORS; `ETag` and `Cache-Control` on images).

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use sha2::{Digest, Sha256};

/// A request that cannot be answered: its status and a one-line reason (the response body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HttpError {
    pub status: u16,
    pub message: String,
}

impl HttpError {
    pub(crate) fn new(status: u16, message: String) -> HttpError {
        HttpError { status, message }
    }

    /// The error of a slide read, by kind: a request the reader refuses (`Usage`: a bad level
    /// or size) is `400`, one over a size bound (`Limits`) `413`, anything else (a damaged or
    /// unreadable slide) `500`; the message names the slide.
    pub(crate) fn from_read(name: &str, e: &slidestream::Error) -> HttpError {
        let status = match e {
            slidestream::Error::Usage(_) => 400,
            slidestream::Error::Limits { .. } => 413,
            _ => 500,
        };
        HttpError::new(status, format!("{name}: {}", crate::output::one_line(&e.to_string())))
    }

    pub(crate) fn into_response(self) -> Response<Body> {
        let mut r = Response::new(Body::from(format!("{}\n", self.message)));
        *r.status_mut() = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        r
    }
}

/// A `200` answer with `body` of type `mime`.
pub(crate) fn ok(mime: &str, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Body::from(body));
    if let Ok(v) = HeaderValue::from_str(mime) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// A `200` JSON answer.
pub(crate) fn json(v: &serde_json::Value) -> Response<Body> {
    ok("application/json", v.to_string().into_bytes())
}

/// The entity tag of an image: a hash of the slide's quickhash (or its path and modification
/// time when it has none) and the request path, so a changed slide gets new tags.
pub(crate) fn etag(slide_hash: &str, path: &str) -> String {
    let mut h = Sha256::new();
    h.update(slide_hash.as_bytes());
    h.update([0]);
    h.update(path.as_bytes());
    let d = h.finalize();
    format!("\"{}\"", d.iter().take(12).map(|b| format!("{b:02x}")).collect::<String>())
}

/// Whether the request's `If-None-Match` names `tag` (or is `*`).
pub(crate) fn not_modified(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == tag || t == "*")
}

/// `response` with the caching headers of an image tagged `tag`.
pub(crate) fn cacheable(mut response: Response<Body>, tag: &str) -> Response<Body> {
    if let Ok(v) = HeaderValue::from_str(tag) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    response
}

/// A `304 Not Modified` for `tag`.
pub(crate) fn not_modified_response(tag: &str) -> Response<Body> {
    let r = Response::builder().status(StatusCode::NOT_MODIFIED).body(Body::empty()).unwrap_or_default();
    cacheable(r, tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_match_and_differ() {
        let a = etag("abc", "/iiif/3/x/full/max/0/default.jpg");
        assert_ne!(a, etag("abd", "/iiif/3/x/full/max/0/default.jpg"));
        assert_ne!(a, etag("abc", "/iiif/3/x/full/max/0/default.png"));
        let mut h = HeaderMap::new();
        assert!(!not_modified(&h, &a));
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_str(&format!("\"zz\", {a}")).unwrap());
        assert!(not_modified(&h, &a));
    }
}
