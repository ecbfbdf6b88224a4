//! IIIF Image API 3.0 (<https://iiif.io/api/image/3.0/>): parsing of the image request's
//! region, size, rotation, quality and format, and the `info.json` document. Pure functions:
//! the unit tests below follow the spec's examples; rendering lives in `render.rs`.

use super::http::HttpError;

/// The largest tile edge offered in `info.json` (`tiles[0].width`), pixels.
pub(crate) const TILE: u64 = 512;

/// One parsed image request, resolved against an image of `width × height` level-0 pixels.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImageRequest {
    /// Region in level-0 pixels: x, y, width, height (inside the image, non-empty).
    pub region: (u64, u64, u64, u64),
    /// Output size before rotation, pixels.
    pub size: (u64, u64),
    /// Mirror horizontally before rotating (`!` prefix).
    pub mirror: bool,
    /// Clockwise rotation, degrees: 0, 90, 180 or 270.
    pub rotation: u32,
    pub quality: Quality,
    pub format: Format,
}

/// Output colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quality {
    /// `default` and `color`: RGB as read.
    Color,
    /// `gray`: ITU-R BT.601 luma, `(299 R + 587 G + 114 B) / 1000`.
    Gray,
    /// `bitonal`: luma above 127 white, else black.
    Bitonal,
}

/// Output encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Jpg,
    Png,
}

impl Format {
    /// The `Content-Type` of the encoding.
    pub(crate) fn mime(self) -> &'static str {
        match self {
            Format::Jpg => "image/jpeg",
            Format::Png => "image/png",
        }
    }
}

/// Limits and switches of the server that the parse applies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    /// Largest output area, pixels (`maxArea`); larger requests are `413`.
    pub max_area: u64,
    /// Whether `^` sizes may exceed the region (`sizeUpscaling`); otherwise such a request is `501`.
    pub allow_upscale: bool,
}

fn bad(msg: String) -> HttpError {
    HttpError::new(400, msg)
}

fn parse_u64(s: &str, what: &str) -> Result<u64, HttpError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(format!("{what}: {s:?} is not a non-negative integer")));
    }
    s.parse::<u64>().map_err(|_| bad(format!("{what}: {s:?} is too large")))
}

fn parse_f64(s: &str, what: &str) -> Result<f64, HttpError> {
    // IIIF numbers: digits with an optional fraction, no sign, exponent or spaces.
    let ok = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') && s.bytes().filter(|&b| b == b'.').count() <= 1 && s != ".";
    match s.parse::<f64>() {
        Ok(v) if ok && v.is_finite() => Ok(v),
        _ => Err(bad(format!("{what}: {s:?} is not a non-negative number"))),
    }
}

fn four<'a>(s: &'a str, what: &str) -> Result<[&'a str; 4], HttpError> {
    let parts: Vec<&str> = s.split(',').collect();
    <[&str; 4]>::try_from(parts).map_err(|_| bad(format!("{what}: expected four comma-separated numbers, got {s:?}")))
}

/// The region parameter against a `width × height` image: `full`, `square` (centred, the short
/// side), `x,y,w,h` (pixels) or `pct:x,y,w,h` (percent of the image, rounded to the nearest
/// pixel). A region reaching past the image is cropped to it; one starting outside it, or of
/// zero width or height, is `400` (spec §4.1).
pub(crate) fn parse_region(s: &str, width: u64, height: u64) -> Result<(u64, u64, u64, u64), HttpError> {
    let (x, y, w, h) = match s {
        "full" => (0, 0, width, height),
        "square" => {
            let side = width.min(height);
            ((width - side) / 2, (height - side) / 2, side, side)
        }
        _ => {
            if let Some(p) = s.strip_prefix("pct:") {
                let v = four(p, "region")?;
                let f: Vec<f64> = v.iter().map(|x| parse_f64(x, "region")).collect::<Result<_, _>>()?;
                let px = |pct: f64, of: u64| (pct / 100.0 * of as f64).round().min(u64::MAX as f64) as u64;
                (px(f[0], width), px(f[1], height), px(f[2], width), px(f[3], height))
            } else {
                let v = four(s, "region")?;
                (parse_u64(v[0], "region")?, parse_u64(v[1], "region")?, parse_u64(v[2], "region")?, parse_u64(v[3], "region")?)
            }
        }
    };
    if w == 0 || h == 0 {
        return Err(bad(format!("region {s:?} has zero width or height")));
    }
    if x >= width || y >= height {
        return Err(bad(format!("region {s:?} starts outside the {width} x {height} image")));
    }
    Ok((x, y, w.min(width - x), h.min(height - y)))
}

/// The size parameter for a region of `rw × rh` pixels: `max`, `w,`, `,h`, `pct:n`, `w,h`,
/// `!w,h`, each optionally `^`-prefixed (spec §4.2). Without `^` the result may not exceed the
/// region (`400`); with it, a result larger than the region needs [`Policy::allow_upscale`]
/// (`501` otherwise). `max` is the region fitted into [`Policy::max_area`]. A result of zero
/// pixels is `400`; one over `max_area` is `413`.
pub(crate) fn parse_size(s: &str, rw: u64, rh: u64, policy: Policy) -> Result<(u64, u64), HttpError> {
    let (up, body) = match s.strip_prefix('^') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let (fw, fh) = (rw as f64, rh as f64);
    let round = |v: f64| v.round().max(0.0).min(u64::MAX as f64) as u64;
    let (w, h) = if body == "max" {
        let area = fw * fh;
        if area <= policy.max_area as f64 {
            (rw, rh)
        } else {
            let k = (policy.max_area as f64 / area).sqrt();
            ((fw * k).floor().max(1.0) as u64, (fh * k).floor().max(1.0) as u64)
        }
    } else if let Some(p) = body.strip_prefix("pct:") {
        let n = parse_f64(p, "size")?;
        (round(fw * n / 100.0), round(fh * n / 100.0))
    } else if let Some(p) = body.strip_prefix('!') {
        let (a, b) = p.split_once(',').ok_or_else(|| bad(format!("size {s:?}: expected !w,h")))?;
        let (bw, bh) = (parse_u64(a, "size")?, parse_u64(b, "size")?);
        let k = (bw as f64 / fw).min(bh as f64 / fh);
        (round(fw * k).min(bw), round(fh * k).min(bh))
    } else {
        let (a, b) = body.split_once(',').ok_or_else(|| bad(format!("size {s:?}: expected max, w,, ,h, pct:n, w,h or !w,h")))?;
        match (a.is_empty(), b.is_empty()) {
            (false, true) => {
                let w = parse_u64(a, "size")?;
                (w, round(fh * w as f64 / fw))
            }
            (true, false) => {
                let h = parse_u64(b, "size")?;
                (round(fw * h as f64 / fh), h)
            }
            (false, false) => (parse_u64(a, "size")?, parse_u64(b, "size")?),
            (true, true) => return Err(bad(format!("size {s:?}: give a width, a height or both"))),
        }
    };
    if w == 0 || h == 0 {
        return Err(bad(format!("size {s:?} gives an image of zero pixels")));
    }
    if w > rw || h > rh {
        if !up {
            return Err(bad(format!("size {s:?} is larger than the {rw} x {rh} region; upscaling needs the ^ prefix")));
        }
        if !policy.allow_upscale {
            return Err(HttpError::new(501, format!("size {s:?}: upscaling is off on this server (slidestream serve --allow-upscale)")));
        }
    }
    match w.checked_mul(h) {
        Some(a) if a <= policy.max_area => Ok((w, h)),
        _ => Err(HttpError::new(413, format!("size {s:?}: {w} x {h} pixels is more than this server's maxArea of {}", policy.max_area))),
    }
}

/// The rotation parameter: `[!]degrees`, 0 ≤ degrees ≤ 360. Multiples of 90 are served
/// (`!` mirrors first); any other angle is `501` (`rotationArbitrary` is not offered).
pub(crate) fn parse_rotation(s: &str) -> Result<(bool, u32), HttpError> {
    let (mirror, body) = match s.strip_prefix('!') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let deg = parse_f64(body, "rotation")?;
    if deg > 360.0 {
        return Err(bad(format!("rotation {s:?} is over 360 degrees")));
    }
    if deg % 90.0 != 0.0 {
        return Err(HttpError::new(501, format!("rotation {s:?}: only multiples of 90 degrees are served")));
    }
    Ok((mirror, (deg as u32) % 360))
}

/// `quality.format`: quality `default`, `color`, `gray` or `bitonal`; format `jpg` or `png`.
/// Other IIIF formats (`tif`, `gif`, `webp`, `jp2`, `pdf`) are `501`; anything else is `400`.
pub(crate) fn parse_quality_format(s: &str) -> Result<(Quality, Format), HttpError> {
    let (q, f) = s.rsplit_once('.').ok_or_else(|| bad(format!("{s:?}: expected quality.format")))?;
    let quality = match q {
        "default" | "color" => Quality::Color,
        "gray" => Quality::Gray,
        "bitonal" => Quality::Bitonal,
        _ => return Err(bad(format!("quality {q:?}: expected default, color, gray or bitonal"))),
    };
    let format = match f {
        "jpg" => Format::Jpg,
        "png" => Format::Png,
        "tif" | "gif" | "webp" | "jp2" | "pdf" => return Err(HttpError::new(501, format!("format {f:?} is not served (jpg, png)"))),
        _ => return Err(bad(format!("format {f:?}: expected jpg or png"))),
    };
    Ok((quality, format))
}

/// A whole image request: `region/size/rotation/quality.format` against a `width × height` image.
pub(crate) fn parse_request(parts: [&str; 4], width: u64, height: u64, policy: Policy) -> Result<ImageRequest, HttpError> {
    let region = parse_region(parts[0], width, height)?;
    let size = parse_size(parts[1], region.2, region.3, policy)?;
    let (mirror, rotation) = parse_rotation(parts[2])?;
    let (quality, format) = parse_quality_format(parts[3])?;
    Ok(ImageRequest { region, size, mirror, rotation, quality, format })
}

/// The `info.json` of an image service at `base` (its URI without `/info.json`) for a
/// `width × height` image: compliance level 2, `tiles` of [`TILE`] pixels at the power-of-two
/// scale factors down to one tile for which `served(factor)` holds (a slide with few levels
/// cannot serve the coarsest tiles within the read bound), `sizes` (the power-of-two
/// reductions of the whole image within `maxArea`, smallest first).
pub(crate) fn info_json(base: &str, width: u64, height: u64, policy: Policy, served: impl Fn(u64) -> bool) -> serde_json::Value {
    let mut all = vec![1u64];
    while all.last().is_some_and(|&f| width.div_ceil(f) > TILE || height.div_ceil(f) > TILE) {
        all.push(all.last().unwrap_or(&1) * 2);
    }
    let factors: Vec<u64> = all.iter().copied().filter(|&f| f == 1 || served(f)).collect();
    let sizes: Vec<serde_json::Value> = all
        .iter()
        .rev()
        .map(|&f| (width.div_ceil(f), height.div_ceil(f)))
        .filter(|&(w, h)| w.saturating_mul(h) <= policy.max_area)
        .map(|(w, h)| serde_json::json!({"width": w, "height": h}))
        .collect();
    let mut features = vec!["mirroring"];
    if policy.allow_upscale {
        features.push("sizeUpscaling");
    }
    serde_json::json!({
        "@context": "http://iiif.io/api/image/3/context.json",
        "id": base,
        "type": "ImageService3",
        "protocol": "http://iiif.io/api/image",
        "profile": "level2",
        "width": width,
        "height": height,
        "maxArea": policy.max_area,
        "sizes": sizes,
        "tiles": [{"width": TILE, "height": TILE, "scaleFactors": factors}],
        "extraFormats": ["png"],
        "extraQualities": ["color", "gray", "bitonal"],
        "extraFeatures": features,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Policy = Policy { max_area: 1 << 24, allow_upscale: false };

    fn status<T: std::fmt::Debug>(r: Result<T, HttpError>) -> u16 {
        r.expect_err("expected an error").status
    }

    #[test]
    fn regions() {
        assert_eq!(parse_region("full", 300, 200).unwrap(), (0, 0, 300, 200));
        assert_eq!(parse_region("square", 300, 200).unwrap(), (50, 0, 200, 200));
        assert_eq!(parse_region("square", 200, 301).unwrap(), (0, 50, 200, 200));
        assert_eq!(parse_region("10,20,30,40", 300, 200).unwrap(), (10, 20, 30, 40));
        // Cropped at the image's edge.
        assert_eq!(parse_region("250,150,100,100", 300, 200).unwrap(), (250, 150, 50, 50));
        assert_eq!(parse_region("pct:10,10,50,50", 300, 200).unwrap(), (30, 20, 150, 100));
        assert_eq!(parse_region("pct:0.5,0,99.5,100", 1000, 10).unwrap(), (5, 0, 995, 10));
        for s in ["300,0,10,10", "0,200,10,10", "0,0,0,10", "a,b,c,d", "1,2,3", "-1,0,5,5", "pct:-1,0,5,5", "pct:1e2,0,5,5", "", "fulll"] {
            assert_eq!(status(parse_region(s, 300, 200)), 400, "{s}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("max", 300, 200, P).unwrap(), (300, 200));
        assert_eq!(parse_size("150,", 300, 200, P).unwrap(), (150, 100));
        assert_eq!(parse_size(",100", 300, 200, P).unwrap(), (150, 100));
        assert_eq!(parse_size("pct:50", 300, 200, P).unwrap(), (150, 100));
        assert_eq!(parse_size("30,40", 300, 200, P).unwrap(), (30, 40));
        assert_eq!(parse_size("!150,150", 300, 200, P).unwrap(), (150, 100));
        assert_eq!(parse_size("!300,100", 300, 200, P).unwrap(), (150, 100));
        // No ^: larger than the region is a bad request; with ^ it needs the server's consent.
        assert_eq!(status(parse_size("301,", 300, 200, P)), 400);
        assert_eq!(status(parse_size("pct:101", 300, 200, P)), 400);
        assert_eq!(status(parse_size("^301,", 300, 200, P)), 501);
        let up = Policy { allow_upscale: true, ..P };
        assert_eq!(parse_size("^600,", 300, 200, up).unwrap(), (600, 400));
        assert_eq!(parse_size("^max", 300, 200, P).unwrap(), (300, 200));
        // max is fitted into maxArea; explicit sizes over it are 413.
        let small = Policy { max_area: 600, ..P };
        assert_eq!(parse_size("max", 300, 200, small).unwrap(), (30, 20));
        assert_eq!(status(parse_size("100,100", 300, 200, small)), 413);
        for s in ["0,", ",0", "pct:0", ",", "abc", "!1,", "w,h", "max,"] {
            assert_eq!(status(parse_size(s, 300, 200, P)), 400, "{s}");
        }
    }

    #[test]
    fn rotations_qualities_formats() {
        assert_eq!(parse_rotation("0").unwrap(), (false, 0));
        assert_eq!(parse_rotation("!90").unwrap(), (true, 90));
        assert_eq!(parse_rotation("360").unwrap(), (false, 0));
        assert_eq!(parse_rotation("180.0").unwrap(), (false, 180));
        assert_eq!(status(parse_rotation("22.5")), 501);
        assert_eq!(status(parse_rotation("361")), 400);
        assert_eq!(status(parse_rotation("-90")), 400);
        assert_eq!(parse_quality_format("default.jpg").unwrap(), (Quality::Color, Format::Jpg));
        assert_eq!(parse_quality_format("gray.png").unwrap(), (Quality::Gray, Format::Png));
        assert_eq!(status(parse_quality_format("default.webp")), 501);
        assert_eq!(status(parse_quality_format("sepia.jpg")), 400);
        assert_eq!(status(parse_quality_format("default")), 400);
    }

    #[test]
    fn info_lists_tiles_and_sizes() {
        let v = info_json("http://h/iiif/3/a", 2000, 1000, P, |_| true);
        assert_eq!(v["profile"], "level2");
        assert_eq!(v["tiles"][0]["scaleFactors"], serde_json::json!([1, 2, 4]));
        // Factors the server cannot read within its bound are not offered; sizes stay.
        let v = info_json("http://h/iiif/3/a", 2000, 1000, P, |f| f < 4);
        assert_eq!(v["tiles"][0]["scaleFactors"], serde_json::json!([1, 2]));
        assert_eq!(v["sizes"][0], serde_json::json!({"width": 500, "height": 250}));
        assert_eq!(v["sizes"].as_array().unwrap().len(), 3);
    }
}
