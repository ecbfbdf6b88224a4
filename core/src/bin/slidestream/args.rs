//! Argument parsing conventions: number parsers that accept a leading `-` so that negative
//! values reach them and are refused with a message naming the flag (instead of clap's
//! "unexpected argument '-1'"), the size check of argument-sized buffers, and clap's errors as
//! one `error: …` line.

use slidestream::{Error, Location};

/// `s` as an integer of type `T`; a negative number `T` cannot hold is refused in words.
fn number<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    let t = s.trim();
    t.parse::<T>().map_err(|_| {
        let negative = t.strip_prefix('-').is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
        if negative {
            format!("{t} is negative; expected {what}")
        } else {
            format!("not a number: {t:?}; expected {what}")
        }
    })
}

/// An index or count, 0 or more (`--level`, `--seed`, `--threads`, `--patches`).
pub(crate) fn parse_count<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    number(s, "an integer, 0 or more")
}

/// A count of 1 or more (`--batch`, `--tiles`, a patch edge).
pub(crate) fn parse_positive(s: &str) -> Result<u64, String> {
    match number::<u64>(s, "an integer, 1 or more")? {
        0 => Err("0: expected an integer, 1 or more".into()),
        n => Ok(n),
    }
}

/// [`parse_positive`] as a `usize`.
pub(crate) fn parse_positive_usize(s: &str) -> Result<usize, String> {
    usize::try_from(parse_positive(s)?).map_err(|_| format!("{s:?} is too large"))
}

fn parse_pair<T: std::str::FromStr>(s: &str, what: &str) -> Result<(T, T), String> {
    let (a, b) = s.split_once(',').ok_or_else(|| format!("expected two numbers \"A,B\", got {s:?}"))?;
    Ok((number(a, what)?, number(b, what)?))
}

/// "X,Y", each any integer (locations may be negative).
pub(crate) fn parse_pair_i64(s: &str) -> Result<(i64, i64), String> {
    parse_pair(s, "an integer")
}

/// "W,H", each 1 or more.
pub(crate) fn parse_size(s: &str) -> Result<(u64, u64), String> {
    let (w, h): (u64, u64) = parse_pair(s, "W,H of 1 or more pixels")?;
    if w == 0 || h == 0 {
        return Err(format!("{w}x{h}: expected W,H of 1 or more pixels"));
    }
    Ok((w, h))
}

/// A bounding size: "W,H" (as [`parse_size`], at most 65536 a side) or one number N for N,N.
pub(crate) fn parse_bound(s: &str) -> Result<(u64, u64), String> {
    let (w, h) = if s.contains(',') {
        parse_size(s)?
    } else {
        let n: u64 = s.trim().parse().map_err(|_| format!("{s:?}: expected W,H or one number of 1 or more pixels"))?;
        if n == 0 {
            return Err("0: expected 1 or more pixels".into());
        }
        (n, n)
    };
    if w > 65536 || h > 65536 {
        return Err(format!("{w}x{h}: at most 65536 pixels a side"));
    }
    Ok((w, h))
}

/// `bytes` (`None` = overflowed) as a `usize` when at most `max` (the slide's
/// `max_region_bytes`), else the library's limits error for `what` at `at`: every buffer the
/// CLI sizes from an argument is checked with it before it is allocated.
pub(crate) fn within_limit(at: &Location, what: &str, bytes: Option<u64>, max: u64) -> Result<usize, Error> {
    bytes.filter(|&b| b <= max).and_then(|b| usize::try_from(b).ok()).ok_or_else(|| Error::limits(at, format!("{what} exceeds max_region_bytes ({max} bytes)")))
}

/// A clap error as one line: the message up to its first blank line (the usage block and
/// tips that follow are dropped), lines joined by spaces, without clap's own `error: `
/// prefix, plus a pointer to `--help`.
pub(crate) fn clap_one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let head: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
    let joined = head.join(" ");
    let msg = joined.strip_prefix("error: ").unwrap_or(&joined);
    format!("{msg} (see --help)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_numbers_are_refused_in_words() {
        assert_eq!(parse_count::<usize>("-1").unwrap_err(), "-1 is negative; expected an integer, 0 or more");
        assert!(parse_size("-1,10").unwrap_err().contains("-1 is negative"));
        assert!(parse_size("0,10").is_err());
        assert_eq!(parse_size(" 3, 4").unwrap(), (3, 4));
        assert_eq!(parse_pair_i64("-5,-6").unwrap(), (-5, -6));
        assert!(parse_positive("0").is_err() && parse_positive("--x").unwrap_err().contains("not a number"));
    }
}
