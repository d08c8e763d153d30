//! Access-log parsers, one line at a time. Formats (docs/analyze.md):
//!
//! - `vodlab`: `vodlab serve --access-log`, space-separated
//!   `time conn session path offset length status sent service_us cache [form [cmcd]]`;
//!   `time` is the completion, the arrival is `time - service_us`; `cmcd`
//!   is the request's CMCD in its query form (`CMCD=br%3D800...`, `-` for
//!   none; [`vodlab_cmcd::Cmcd::to_query`]), whose `br` gives the
//!   request's bit rate ([`vodlab_cmcd_of`] reads it all).
//! - `nginx`: a log written with the `log_format` [`NGINX_LOG_FORMAT`]
//!   (`vodlab compare` configures nginx with it).
//! - `csv`: a header line naming at least `start_s,end_s,session,file,offset,bytes`,
//!   optionally `form`, `connection`, `bitrate_kbps`, `status`, in any order.

use thiserror::Error;

use crate::{key, Form, Request};

/// The nginx `log_format` the `nginx` parser reads (one line).
pub const NGINX_LOG_FORMAT: &str = "log_format vodlab_analyze '$msec $connection \"$http_x_vodlab_session\" $uri $status $body_bytes_sent $request_time \"$http_range\"';";

/// A line that cannot be read; names the line and what is wrong.
#[derive(Debug, Error, PartialEq)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: u64,
    /// What is wrong.
    pub reason: String,
}

/// What a line held; the path is borrowed from the line, so parsing
/// allocates nothing per line.
#[derive(Debug, Clone, PartialEq)]
pub enum Line<'a> {
    /// A request to analyse.
    Request(Request, FileName<'a>),
    /// A line to skip: a header, a blank line, or an error response.
    Skip(&'static str),
}

/// A request's path, for bit-rate lookups.
#[derive(Debug, Clone, PartialEq)]
pub struct FileName<'a>(pub &'a str);

/// A log format.
#[derive(Debug, Clone, PartialEq)]
pub enum LogFormat {
    /// `vodlab serve`'s access log.
    Vodlab,
    /// nginx with [`NGINX_LOG_FORMAT`].
    Nginx,
    /// CSV with these columns (from the header line).
    Csv(CsvColumns),
}

/// Column positions of a CSV log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CsvColumns {
    start: usize,
    end: usize,
    session: usize,
    file: usize,
    offset: usize,
    bytes: usize,
    form: Option<usize>,
    conn: Option<usize>,
    bitrate: Option<usize>,
    status: Option<usize>,
    count: usize,
}

impl LogFormat {
    /// Parses a format name (`vodlab`, `nginx`, `csv`); a CSV's columns come
    /// from its header with [`LogFormat::from_csv_header`].
    pub fn detect(first_line: &str) -> Result<LogFormat, ParseError> {
        let t = first_line.trim();
        if t.contains(',') && t.split(',').any(|c| c.trim() == "start_s") {
            return LogFormat::from_csv_header(t);
        }
        let n = t.split_ascii_whitespace().count();
        if t.contains('"') {
            return Ok(LogFormat::Nginx);
        }
        if (10..=12).contains(&n) {
            return Ok(LogFormat::Vodlab);
        }
        Err(ParseError {
            line: 1,
            reason: format!(
                "cannot tell the log format from {:?}: expected vodlab serve's access log (10 to 12 fields), nginx's `vodlab_analyze` format (quoted session and range) or a CSV header with start_s,end_s,session,file,offset,bytes",
                t.chars().take(120).collect::<String>()
            ),
        })
    }

    /// The CSV format of a header line.
    pub fn from_csv_header(header: &str) -> Result<LogFormat, ParseError> {
        let cols: Vec<&str> = header.split(',').map(str::trim).collect();
        let find = |name: &str| cols.iter().position(|c| *c == name);
        let need = |name: &'static str| {
            find(name).ok_or_else(|| ParseError {
                line: 1,
                reason: format!(
                    "CSV header lacks the column `{name}` (has: {})",
                    cols.join(",")
                ),
            })
        };
        Ok(LogFormat::Csv(CsvColumns {
            start: need("start_s")?,
            end: need("end_s")?,
            session: need("session")?,
            file: need("file")?,
            offset: need("offset")?,
            bytes: need("bytes")?,
            form: find("form"),
            conn: find("connection"),
            bitrate: find("bitrate_kbps"),
            status: find("status"),
            count: cols.len(),
        }))
    }

    /// Reads one line (1-based number `n`).
    pub fn parse<'a>(&self, line: &'a str, n: u64) -> Result<Line<'a>, ParseError> {
        let err = |reason: String| ParseError { line: n, reason };
        let t = line.trim_end_matches(['\r', '\n']);
        if t.trim().is_empty() {
            return Ok(Line::Skip("blank"));
        }
        match self {
            LogFormat::Vodlab => parse_vodlab(t).map_err(err),
            LogFormat::Nginx => parse_nginx(t).map_err(err),
            LogFormat::Csv(c) => {
                if n == 1 {
                    return Ok(Line::Skip("header"));
                }
                parse_csv(c, t).map_err(err)
            }
        }
    }
}

fn num<T: std::str::FromStr>(field: &str, what: &str) -> Result<T, String> {
    field
        .parse()
        .map_err(|_| format!("{what} {field:?} is not a number"))
}

/// An unsigned integer: plain digits without the generic parser, anything
/// else (a sign, overflow, junk) through it, so the errors are the same.
fn uint(field: &str, what: &str) -> Result<u64, String> {
    let b = field.as_bytes();
    if !b.is_empty() && b.len() <= 19 && b.iter().all(u8::is_ascii_digit) {
        return Ok(b.iter().fold(0u64, |v, d| v * 10 + u64::from(d - b'0')));
    }
    num(field, what)
}

/// Splits on ASCII whitespace into `out`; returns how many fields there
/// were (fields past `out`'s length are counted, not stored).
fn split_ws<'a>(t: &'a str, out: &mut [&'a str]) -> usize {
    let b = t.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        if n < out.len() {
            // both ends are at ASCII bytes: char boundaries
            out[n] = &t[start..i];
        }
        n += 1;
    }
    n
}

fn time(field: &str, what: &str) -> Result<f64, String> {
    let v: f64 = num(field, what)?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{what} {field:?} is not a time >= 0"));
    }
    Ok(v)
}

fn parse_form(s: &str) -> Result<Form, String> {
    match s {
        "chunk" => Ok(Form::Chunk),
        "open" => Ok(Form::Open),
        "whole" | "-" | "" => Ok(Form::Whole),
        other => Err(format!("form {other:?} is not chunk, open or whole")),
    }
}

/// The CMCD of a line of vodlab serve's access log (its 12th field);
/// `None` on a line without it (older logs) or with `-` (none sent).
pub fn vodlab_cmcd_of(line: &str) -> Option<vodlab_cmcd::Cmcd> {
    let mut f = [""; 12];
    match split_ws(line, &mut f) {
        12 if f[11] != "-" => Some(vodlab_cmcd::Cmcd::from_query(f[11])),
        _ => None,
    }
}

fn parse_vodlab(t: &str) -> Result<Line<'_>, String> {
    let mut f = [""; 12];
    let count = split_ws(t, &mut f);
    if !(10..=12).contains(&count) {
        return Err(format!("{count} fields, vodlab's access log has 10 to 12"));
    }
    let done = time(f[0], "time")?;
    let conn = uint(f[1], "connection")?;
    let status: u16 = num(f[6], "status")?;
    if status >= 400 {
        return Ok(Line::Skip("error status"));
    }
    let offset = uint(f[4], "offset")?;
    let bytes = uint(f[7], "bytes sent")?;
    let service_us = uint(f[8], "service time")?;
    let form = match count {
        11 | 12 => parse_form(f[10])?,
        // without the form field, a 206 is a chunk and a 200 the whole file
        _ if status == 206 => Form::Chunk,
        _ => Form::Whole,
    };
    let start = (done - service_us as f64 / 1e6).max(0.0);
    Ok(Line::Request(
        Request {
            start_s: start,
            end_s: done,
            session: key(f[2]),
            file: key(f[3]),
            conn: Some(conn),
            offset,
            bytes,
            form,
            // the bit rate the client declared (CMCD `br`, kbit/s)
            bitrate_kbps: match f[11] {
                "" | "-" => None,
                q => vodlab_cmcd::Cmcd::from_query(q).br.map(|b| b as f64),
            },
        },
        FileName(f[3]),
    ))
}

/// Splits on spaces, keeping `"..."` fields whole (quotes removed).
fn fields(t: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut rest = t.trim_start();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').ok_or("unterminated quoted field")?;
            out.push(&r[..end]);
            rest = r[end + 1..].trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            out.push(&rest[..end]);
            rest = rest[end..].trim_start();
        }
    }
    Ok(out)
}

/// `bytes=A-B` → (A, Chunk); `bytes=A-` → (A, Open); `-` → (0, Whole).
fn range_form(r: &str) -> Result<(u64, Form), String> {
    if r.is_empty() || r == "-" {
        return Ok((0, Form::Whole));
    }
    let spec = r
        .strip_prefix("bytes=")
        .ok_or_else(|| format!("range {r:?} does not start with bytes="))?;
    let first = spec.split(',').next().unwrap_or("").trim();
    let (a, b) = first
        .split_once('-')
        .ok_or_else(|| format!("range {r:?} has no `-`"))?;
    if a.is_empty() {
        // a suffix range (last N bytes): position unknown without the size
        return Ok((0, Form::Chunk));
    }
    let a: u64 = num(a, "range start")?;
    Ok((
        a,
        if b.trim().is_empty() {
            Form::Open
        } else {
            Form::Chunk
        },
    ))
}

fn parse_nginx(t: &str) -> Result<Line<'_>, String> {
    let f = fields(t)?;
    if f.len() != 8 {
        return Err(format!(
            "{} fields, the vodlab_analyze log_format has 8: {NGINX_LOG_FORMAT}",
            f.len()
        ));
    }
    let done = time(f[0], "$msec")?;
    let conn: u64 = num(f[1], "$connection")?;
    let status: u16 = num(f[4], "$status")?;
    if status >= 400 {
        return Ok(Line::Skip("error status"));
    }
    let bytes: u64 = num(f[5], "$body_bytes_sent")?;
    let took = time(f[6], "$request_time")?;
    let (offset, form) = range_form(f[7])?;
    let session = if f[2].is_empty() || f[2] == "-" {
        key(&format!("c{conn}"))
    } else {
        key(f[2])
    };
    Ok(Line::Request(
        Request {
            start_s: (done - took).max(0.0),
            end_s: done,
            session,
            file: key(f[3]),
            conn: Some(conn),
            offset,
            bytes,
            form,
            bitrate_kbps: None,
        },
        FileName(f[3]),
    ))
}

fn parse_csv<'a>(c: &CsvColumns, t: &'a str) -> Result<Line<'a>, String> {
    // up to 32 columns on the stack, more in a Vec
    let mut small = [""; 32];
    let large: Vec<&str>;
    let f: &[&str] = if c.count <= small.len() {
        let mut n = 0;
        for field in t.split(',') {
            if n < small.len() {
                small[n] = field.trim();
            }
            n += 1;
        }
        if n != c.count {
            return Err(format!("{n} fields, the header has {}", c.count));
        }
        &small[..n]
    } else {
        large = t.split(',').map(str::trim).collect();
        if large.len() != c.count {
            return Err(format!(
                "{} fields, the header has {}",
                large.len(),
                c.count
            ));
        }
        &large
    };
    if let Some(i) = c.status {
        let status: u16 = num(f[i], "status")?;
        if status >= 400 {
            return Ok(Line::Skip("error status"));
        }
    }
    let start = time(f[c.start], "start_s")?;
    let end = time(f[c.end], "end_s")?;
    if end < start {
        return Err(format!("end_s {end} is before start_s {start}"));
    }
    let bitrate = match c.bitrate {
        Some(i) if !f[i].is_empty() => {
            let b: f64 = num(f[i], "bitrate_kbps")?;
            if !(b.is_finite() && b > 0.0) {
                return Err(format!("bitrate_kbps {b} is not > 0"));
            }
            Some(b)
        }
        _ => None,
    };
    Ok(Line::Request(
        Request {
            start_s: start,
            end_s: end,
            session: key(f[c.session]),
            file: key(f[c.file]),
            conn: c.conn.map(|i| num(f[i], "connection")).transpose()?,
            offset: num(f[c.offset], "offset")?,
            bytes: num(f[c.bytes], "bytes")?,
            form: match c.form {
                Some(i) => parse_form(f[i])?,
                None => Form::Chunk,
            },
            bitrate_kbps: bitrate,
        },
        FileName(f[c.file]),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(l: Line) -> Request {
        match l {
            Line::Request(r, _) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn vodlab_lines_with_and_without_the_form() {
        let l = "1795248040.123456 17 42 /t00042/sd.mp4 524288 524288 206 524288 1834 hit";
        let f = LogFormat::detect(l).unwrap();
        assert_eq!(f, LogFormat::Vodlab);
        let r = req(f.parse(l, 1).unwrap());
        assert_eq!(
            (r.offset, r.bytes, r.form, r.conn),
            (524288, 524288, Form::Chunk, Some(17))
        );
        assert!((r.end_s - r.start_s - 0.001834).abs() < 1e-6);
        assert_eq!(r.session, key("42"));
        let r = req(f.parse(&format!("{l} open"), 2).unwrap());
        assert_eq!(r.form, Form::Open);
        assert!(matches!(
            f.parse(&l.replace(" 206 ", " 404 "), 3).unwrap(),
            Line::Skip(_)
        ));
        let e = f.parse(&l.replace("206 524288", "206 x"), 9).unwrap_err();
        assert_eq!(e.to_string(), "line 9: bytes sent \"x\" is not a number");
    }

    #[test]
    fn vodlab_lines_with_the_cmcd_read_it_back() {
        let l = "1795248040.123456 17 42 /t1/sd/00004.m4s 0 524288 200 524288 1834 miss whole";
        let cmcd = vodlab_cmcd::Cmcd {
            br: Some(800),
            bl: Some(1500),
            nor: vec!["00005.m4s".into()],
            sid: Some("s 1,\"x\"".into()),
            ..Default::default()
        };
        let line = format!("{l} {}", cmcd.to_query());
        let f = LogFormat::detect(&line).unwrap();
        assert_eq!(f, LogFormat::Vodlab);
        let r = req(f.parse(&line, 1).unwrap());
        assert_eq!(
            (r.form, r.bytes, r.bitrate_kbps),
            (Form::Whole, 524288, Some(800.0))
        );
        assert_eq!(vodlab_cmcd_of(&line), Some(cmcd));
        // none sent, and older lines without the field
        let none = format!("{l} -");
        assert_eq!(req(f.parse(&none, 2).unwrap()).bitrate_kbps, None);
        assert_eq!(vodlab_cmcd_of(&none), None);
        assert_eq!(req(f.parse(l, 3).unwrap()).bitrate_kbps, None);
        assert_eq!(vodlab_cmcd_of(l), None);
        assert!(f.parse(&format!("{line} extra"), 4).is_err());
    }

    #[test]
    fn the_fast_integer_and_field_splitters_agree_with_the_generic_ones() {
        for f in [
            "0",
            "524288",
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "+5",
            "-1",
            "",
            "12a",
            "٣",
        ] {
            assert_eq!(uint(f, "x"), num::<u64>(f, "x"), "{f:?}");
        }
        let line = "  a\tbb  ccc d é\u{a0}x  ";
        let mut out = [""; 3];
        let n = split_ws(line, &mut out);
        let want: Vec<&str> = line.split_ascii_whitespace().collect();
        assert_eq!(n, want.len());
        assert_eq!(&out[..], &want[..3]);
    }

    #[test]
    fn nginx_lines_give_form_and_session() {
        let f = LogFormat::Nginx;
        let r = req(f
            .parse(
                r#"1700000000.500 9 "s1" /t1/hd.mp4 206 1000 0.250 "bytes=2000-2999""#,
                1,
            )
            .unwrap());
        assert_eq!((r.offset, r.bytes, r.form), (2000, 1000, Form::Chunk));
        assert!((r.start_s - 1700000000.25).abs() < 1e-6);
        let r = req(f
            .parse(
                r#"1700000000.500 9 "-" /t1/hd.mp4 206 1000 0.250 "bytes=2000-""#,
                2,
            )
            .unwrap());
        assert_eq!(r.form, Form::Open);
        assert_eq!(r.session, key("c9"));
        let r = req(f
            .parse(r#"1700000000.500 9 "-" /t1/hd.mp4 200 1000 0.250 "-""#, 3)
            .unwrap());
        assert_eq!(r.form, Form::Whole);
        let e = f
            .parse(r#"1700000000.500 9 "s1 /t1/hd.mp4"#, 4)
            .unwrap_err();
        assert!(e.to_string().starts_with("line 4: "), "{e}");
        let e = f
            .parse(r#"1700000000.500 9 "s" /t 206 1 0.1 "items=1-2""#, 5)
            .unwrap_err();
        assert!(e.reason.contains("bytes="), "{e}");
    }

    #[test]
    fn csv_columns_come_from_the_header() {
        let h = "session,file,start_s,end_s,offset,bytes,form,bitrate_kbps";
        let f = LogFormat::detect(h).unwrap();
        assert!(matches!(f.parse(h, 1).unwrap(), Line::Skip("header")));
        let r = req(f.parse("a,/f,10,12.5,0,100,open,1750", 2).unwrap());
        assert_eq!(
            (r.start_s, r.end_s, r.form, r.bitrate_kbps),
            (10.0, 12.5, Form::Open, Some(1750.0))
        );
        let e = f.parse("a,/f,10,9,0,100,open,1750", 3).unwrap_err();
        assert!(e.reason.contains("before start_s"), "{e}");
        let e = LogFormat::detect("start_s,end_s,file").unwrap_err();
        assert!(e.reason.contains("`session`"), "{e}");
        assert!(LogFormat::detect("hello world").is_err());
    }
}
