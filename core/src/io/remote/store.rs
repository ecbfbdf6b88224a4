//! From a URL and storage options to an `object_store` client.
//!
//! Schemes (`object_store`'s own URL rules, `ObjectStoreScheme::parse`): `s3://bucket/key`
//! (also `s3a://`), `gs://bucket/key`, `az://container/blob` (also `abfs(s)://`, `adl://` and
//! Azure's https hosts), `http(s)://host/path` (a plain HTTP server with range support). Each
//! store starts from its provider's environment variables (`AmazonS3Builder::from_env`:
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` /
//! `AWS_DEFAULT_REGION`, `AWS_ENDPOINT`, web identity and container credentials;
//! `GoogleCloudStorageBuilder::from_env`: `GOOGLE_SERVICE_ACCOUNT` /
//! `GOOGLE_APPLICATION_CREDENTIALS` key files, else the metadata server;
//! `MicrosoftAzureBuilder::from_env`: `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`,
//! SAS tokens, ...), then the caller's storage options override them. `object_store` does not
//! read `~/.aws/config` profiles (it has no `aws-config` dependency); docs/remote.md says so.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientConfigKey, ClientOptions, ObjectStore, ObjectStoreScheme, RetryConfig};

use crate::error::{Error, Result};

/// Options of a remote slide's store: `object_store` configuration keys (`aws_endpoint` or
/// `endpoint`, `region`, `access_key_id`, `secret_access_key`, `session_token`,
/// `google_service_account`, `azure_storage_account_name`, `allow_http`, ...; each provider's
/// `*ConfigKey` names, with or without the provider prefix) plus `anonymous` (`true`: unsigned
/// requests, `skip_signature` in object_store) — string values, as fsspec's
/// `storage_options`. An `endpoint` starting with `http://` implies `allow_http`. A key the
/// URL's provider does not know is an error at open ([`Error::Usage`]), never ignored.
pub type StorageOptions = BTreeMap<String, String>;

/// Longest URL a slide may be opened by, in bytes (as given, and as the URL parser writes it
/// back with its percent-encoding): 8 KiB, the request-line limit of common HTTP servers
/// (nginx's `large_client_header_buffers` 8k, Apache's `LimitRequestLine` 8190). It keeps every
/// request far below the 65,534-byte URI limit of the HTTP client (the `http` crate's `Uri`),
/// past which `object_store` panics ("request must be valid: InvalidUri(TooLong)") instead
/// of returning an error.
pub const MAX_URL_BYTES: usize = crate::limits::LIMITS.url_bytes;

/// Longest object key (bucket and host not included) of an `s3://`, `gs://` or `az://` URL, in
/// bytes of UTF-8 after percent-decoding: Amazon S3 ("a sequence of Unicode characters whose
/// UTF-8 encoding is at most 1,024 bytes long"), Google Cloud Storage (object names of 1–1024
/// bytes of UTF-8) and Azure Blob Storage (blob names of at most 1,024 characters) all refuse
/// longer ones.
pub const MAX_KEY_BYTES: usize = crate::limits::LIMITS.key_bytes;

/// Network settings of one store (from the `SLIDESTREAM_REMOTE_*` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetOptions {
    /// Retries of a failed request (5xx, connection errors, timeouts), with exponential backoff.
    pub retries: usize,
    /// Timeout of one request attempt.
    pub timeout: Duration,
}

/// `true` when `name` is a URL slidestream opens through object storage (`scheme://...` with
/// a scheme of [`ObjectStoreScheme`], or `http://` / `https://`), `false` for a local path.
pub fn is_url(name: &str) -> bool {
    let Some((scheme, rest)) = name.split_once("://") else { return false };
    !rest.is_empty()
        && matches!(
            scheme.to_ascii_lowercase().as_str(),
            "s3" | "s3a" | "gs" | "az" | "adl" | "azure" | "abfs" | "abfss" | "http" | "https"
        )
}

/// A store for `url` and the object's path in it.
///
/// # Errors
/// [`Error::Usage`] for a URL that cannot be parsed, a scheme with no store, an unknown or
/// unparsable storage option (naming it and the provider); [`Error::Io`] (`InvalidInput`) when
/// the provider's builder refuses the configuration (a missing bucket, a bad endpoint).
pub(crate) fn build(url: &str, opts: &StorageOptions, net: NetOptions) -> Result<(Arc<dyn ObjectStore>, ObjectPath)> {
    check_url_text("the URL", url)?;
    let parsed = url::Url::parse(url).map_err(|e| Error::Usage(format!("{}: not a valid URL: {e}", short(url))))?;
    check_url_text("the URL", parsed.as_str())?;
    let (scheme, path) = ObjectStoreScheme::parse(&parsed).map_err(|e| Error::Usage(format!("{url}: {e}")))?;
    if path.as_ref().is_empty() {
        return Err(Error::Usage(format!("{url}: the URL names no object (a bucket or host only)")));
    }
    if scheme != ObjectStoreScheme::Http && path.as_ref().len() > MAX_KEY_BYTES {
        return Err(Error::Usage(format!(
            "{}: the object key is {} bytes; object stores (S3, GCS, Azure) allow at most {MAX_KEY_BYTES}",
            short(url),
            path.as_ref().len()
        )));
    }
    for (k, v) in opts {
        let k = k.to_ascii_lowercase();
        if k.ends_with("endpoint") || k.ends_with("url") {
            check_url_text(&format!("storage option {k:?}"), v)?;
        }
    }
    // `with_client_options` replaces the client settings `from_env` read, so the plain-HTTP
    // permission is worked out here: an http:// endpoint (option or environment) implies it,
    // and `AWS_ALLOW_HTTP` / `GOOGLE_ALLOW_HTTP` / `AZURE_ALLOW_HTTP` still give it.
    let is_endpoint = |k: &str| {
        let k = k.to_ascii_lowercase();
        k.ends_with("endpoint") || k.ends_with("endpoint_url")
    };
    let env_http = std::env::vars().any(|(k, v)| {
        let provider = k.starts_with("AWS_") || k.starts_with("GOOGLE_") || k.starts_with("AZURE_");
        provider && ((is_endpoint(&k) && v.starts_with("http://")) || (k.ends_with("_ALLOW_HTTP") && matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")))
    });
    let endpoint_http = env_http || opts.iter().any(|(k, v)| is_endpoint(k) && v.starts_with("http://"));
    let client = ClientOptions::new()
        .with_timeout(net.timeout)
        .with_connect_timeout(net.timeout)
        .with_allow_http(endpoint_http || scheme == ObjectStoreScheme::Http && parsed.scheme() == "http");
    let retry = RetryConfig {
        backoff: BackoffConfig { init_backoff: Duration::from_millis(50), max_backoff: Duration::from_secs(5), base: 2.0 },
        max_retries: net.retries,
        // Bounds all attempts of one request together: the retries never outlast it.
        retry_timeout: net.timeout.saturating_mul(net.retries as u32 + 1) + Duration::from_secs(1),
    };
    let bad = |provider: &str, key: &str| {
        Error::Usage(format!("{url}: unknown storage option {key:?} for {provider} (object_store's {provider} configuration keys, or `anonymous`)"))
    };
    let built = |r: object_store::Result<Arc<dyn ObjectStore>>| {
        r.map_err(|e| Error::io(&crate::error::Location::file(url), std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())))
    };
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            let mut b = AmazonS3Builder::from_env().with_url(url).with_client_options(client).with_retry(retry);
            for (k, v) in opts {
                let key = if k == "anonymous" { AmazonS3ConfigKey::SkipSignature } else { AmazonS3ConfigKey::from_str(k).map_err(|_| bad("S3", k))? };
                b = b.with_config(key, v);
            }
            built(b.build().map(|s| Arc::new(s) as _))?
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            let mut b = GoogleCloudStorageBuilder::from_env().with_url(url).with_client_options(client).with_retry(retry);
            for (k, v) in opts {
                let key = if k == "anonymous" { GoogleConfigKey::SkipSignature } else { GoogleConfigKey::from_str(k).map_err(|_| bad("GCS", k))? };
                b = b.with_config(key, v);
            }
            built(b.build().map(|s| Arc::new(s) as _))?
        }
        ObjectStoreScheme::MicrosoftAzure => {
            let mut b = MicrosoftAzureBuilder::from_env().with_url(url).with_client_options(client).with_retry(retry);
            for (k, v) in opts {
                let key = if k == "anonymous" { AzureConfigKey::SkipSignature } else { AzureConfigKey::from_str(k).map_err(|_| bad("Azure", k))? };
                b = b.with_config(key, v);
            }
            built(b.build().map(|s| Arc::new(s) as _))?
        }
        ObjectStoreScheme::Http => {
            // The store is rooted at the URL's origin; the object is the URL's path.
            let origin = parsed.origin().ascii_serialization();
            let mut b = HttpBuilder::new().with_url(origin).with_client_options(client).with_retry(retry);
            for (k, v) in opts {
                if k == "anonymous" {
                    continue; // plain HTTP is never signed
                }
                let key = ClientConfigKey::from_str(k).map_err(|_| bad("HTTP", k))?;
                b = b.with_config(key, v);
            }
            built(b.build().map(|s| Arc::new(s) as _))?
        }
        other => return Err(Error::Usage(format!("{url}: {other:?} URLs are not slide sources (use s3://, gs://, az:// or http(s)://)"))),
    };
    Ok((store, path))
}

/// The first 100 characters of a URL, for messages about URLs too long to repeat.
fn short(url: &str) -> String {
    match url.char_indices().nth(100) {
        Some((i, _)) => format!("{}… ({} bytes)", &url[..i], url.len()),
        None => url.to_string(),
    }
}

/// A URL (or an endpoint given as a storage option) the HTTP client can carry: at most
/// [`MAX_URL_BYTES`], and no control character or whitespace (the URL parser would silently
/// drop a tab or newline and trim spaces, so another object than the one named would be read;
/// a space in a key is written `%20`).
///
/// # Errors
/// [`Error::Usage`] naming `what` and the reason.
pub fn check_url_text(what: &str, url: &str) -> Result<()> {
    if url.len() > MAX_URL_BYTES {
        return Err(Error::Usage(format!("{}: {what} is {} bytes long; at most {MAX_URL_BYTES} are accepted", short(url), url.len())));
    }
    if let Some((i, c)) = url.char_indices().find(|(_, c)| c.is_control() || c.is_whitespace()) {
        return Err(Error::Usage(format!(
            "{}: {what} has {c:?} at byte {i}; control characters and whitespace are not accepted (write a space as %20)",
            short(&url.escape_debug().to_string())
        )));
    }
    Ok(())
}
