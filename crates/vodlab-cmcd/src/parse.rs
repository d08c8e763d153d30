//! Parsing: lists, the four headers, the query parameter; lenient (never
//! failing) and strict ([`ParseError`]). See the crate's note.

use std::fmt;

use crate::{Cmcd, Event, Header, ObjectType, PlayerState, StreamType, StreamingFormat, Value};

/// What is wrong with an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Problem {
    /// The key is not a key: empty, or a character other than letters,
    /// digits, `.`, `_`, `-`, `*`.
    BadKey,
    /// A bare key (a boolean's form) where a value is needed.
    NoValue,
    /// Not a non-negative integer (`[0-9]+`, within 64 bits).
    NotAnInteger,
    /// Not a decimal (`-?[0-9]+(.[0-9]+)?`, finite).
    NotADecimal,
    /// Not a quoted string (or a bad escape in one).
    NotAString,
    /// Not an inner list of quoted strings (`("a" "b")`).
    NotAStringList,
    /// Not a boolean: a bare key, `?1` or `?0`.
    NotABoolean,
    /// Not one of the key's tokens.
    UnknownToken,
    /// A value of no syntax at all (a key this crate does not know).
    BadValue,
    /// A query parameter that does not percent-decode to UTF-8.
    BadEncoding,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Problem::BadKey => "not a key",
            Problem::NoValue => "no value",
            Problem::NotAnInteger => "not an integer",
            Problem::NotADecimal => "not a decimal",
            Problem::NotAString => "not a string",
            Problem::NotAStringList => "not a list of strings",
            Problem::NotABoolean => "not a boolean",
            Problem::UnknownToken => "not one of its tokens",
            Problem::BadValue => "not a value",
            Problem::BadEncoding => "not percent-encoded UTF-8",
        })
    }
}

/// A malformed item: the key, what is wrong, and the value as sent.
/// Displayed as `bl: not an integer: "abc"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The key as sent (`CMCD` for the query parameter itself; the
    /// header's name for a `CMSD-Dynamic` hop without a server).
    pub key: String,
    /// What is wrong.
    pub problem: Problem,
    /// The value as sent, `None` for a bare key.
    pub value: Option<String>,
}

impl ParseError {
    pub(crate) fn new(key: &str, problem: Problem, value: Option<&str>) -> ParseError {
        ParseError {
            key: key.to_string(),
            problem,
            value: value.map(str::to_string),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.problem)?;
        if let Some(v) = &self.value {
            write!(f, ": {v:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseError {}

/// Sets `field` to `v` unless it has a value (the first value wins).
fn set<T>(field: &mut Option<T>, v: T) {
    if field.is_none() {
        *field = Some(v);
    }
}

impl Cmcd {
    /// Parses one CMCD list (a header's value, or the query parameter's
    /// value once decoded), leniently: malformed items are skipped.
    pub fn parse(list: &str) -> Cmcd {
        let mut c = Cmcd::default();
        c.read(list);
        c
    }

    /// Parses one CMCD list strictly: the first malformed item is an
    /// error. Empty items (`a=1,,b=2`) are not.
    pub fn try_parse(list: &str) -> Result<Cmcd, ParseError> {
        let mut c = Cmcd::default();
        let mut errors = Vec::new();
        c.read_reporting(list, &mut errors);
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(c),
        }
    }

    /// Reads one CMCD list into `self`: keys `self` already has keep their
    /// values (the first value of a key wins), malformed items are skipped.
    pub fn read(&mut self, list: &str) {
        self.read_reporting(list, &mut Vec::new());
    }

    /// [`Cmcd::read`], pushing an error onto `errors` for each malformed
    /// item (in their order in the list).
    pub fn read_reporting(&mut self, list: &str, errors: &mut Vec<ParseError>) {
        for item in split(list, ',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            let r = if valid_key(key) {
                self.read_item(key, value)
            } else {
                Err(Problem::BadKey)
            };
            if let Err(p) = r {
                errors.push(ParseError::new(key, p, value));
            }
        }
    }

    fn read_item(&mut self, key: &str, v: Option<&str>) -> Result<(), Problem> {
        match key {
            "br" => set(&mut self.br, integer(v)?),
            "d" => set(&mut self.d, integer(v)?),
            "ot" => set(&mut self.ot, token(v, ObjectType::from_token)?),
            "tb" => set(&mut self.tb, integer(v)?),
            "tpb" => set(&mut self.tpb, integer(v)?),
            "bl" => set(&mut self.bl, integer(v)?),
            "dl" => set(&mut self.dl, integer(v)?),
            "df" => set(&mut self.df, integer(v)?),
            "ltc" => set(&mut self.ltc, integer(v)?),
            "mtp" => set(&mut self.mtp, integer(v)?),
            "nor" => {
                let nor = strings(v)?;
                if self.nor.is_empty() {
                    self.nor = nor;
                }
            }
            "nrr" => set(&mut self.nrr, string(v)?),
            "pb" => set(&mut self.pb, integer(v)?),
            "rc" => set(&mut self.rc, integer(v)?),
            "sn" => set(&mut self.sn, integer(v)?),
            "su" => self.su |= boolean(v)?,
            "ts" => set(&mut self.ts, integer(v)?),
            "ttfb" => set(&mut self.ttfb, integer(v)?),
            "ttlb" => set(&mut self.ttlb, integer(v)?),
            "url" => set(&mut self.url, string(v)?),
            "cdn" => set(&mut self.cdn, string(v)?),
            "cid" => set(&mut self.cid, string(v)?),
            "msd" => set(&mut self.msd, integer(v)?),
            "pr" => set(&mut self.pr, decimal(v)?),
            "sf" => set(&mut self.sf, token(v, StreamingFormat::from_token)?),
            "sid" => set(&mut self.sid, string(v)?),
            "st" => set(&mut self.st, token(v, StreamType::from_token)?),
            "v" => set(&mut self.v, integer(v)?),
            "bg" => self.bg |= boolean(v)?,
            "bs" => self.bs |= boolean(v)?,
            "e" => set(&mut self.e, token(v, Event::from_token)?),
            "rtp" => set(&mut self.rtp, integer(v)?),
            "sta" => set(&mut self.sta, token(v, PlayerState::from_token)?),
            _ => {
                let v = custom(v)?;
                self.custom.entry(key.to_string()).or_insert(v);
            }
        }
        Ok(())
    }

    /// Reads the header form: `header` gives a header's value by its
    /// lower-case name (`cmcd-object`), and is asked for the four in the
    /// order Object, Request, Status, Session. A key is taken from
    /// whichever header it came in (the specification's placement is a
    /// SHOULD for the player).
    pub fn from_headers<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Cmcd {
        let mut c = Cmcd::default();
        for h in Header::ALL {
            if let Some(v) = header(h.lower()) {
                c.read(v);
            }
        }
        c
    }

    /// [`Cmcd::from_headers`], strictly: the first malformed item (in
    /// the headers' order) is an error.
    pub fn try_from_headers<'a>(
        header: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Cmcd, ParseError> {
        let mut c = Cmcd::default();
        let mut errors = Vec::new();
        for h in Header::ALL {
            if let Some(v) = header(h.lower()) {
                c.read_reporting(v, &mut errors);
            }
        }
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(c),
        }
    }

    /// Reads the query form from a URL's query (the part after `?`; a
    /// fragment is cut off): the first `CMCD` parameter, `+` as a space,
    /// percent-decoded. A parameter that does not decode (a bad escape,
    /// not UTF-8) gives nothing.
    pub fn from_query(query: &str) -> Cmcd {
        match query_list(query) {
            Ok(Some(list)) => Cmcd::parse(&list),
            _ => Cmcd::default(),
        }
    }

    /// [`Cmcd::from_query`], strictly: a parameter that does not decode is
    /// an error (key `CMCD`), and so is its first malformed item. No
    /// `CMCD` parameter is no key.
    pub fn try_from_query(query: &str) -> Result<Cmcd, ParseError> {
        match query_list(query)? {
            Some(list) => Cmcd::try_parse(&list),
            None => Ok(Cmcd::default()),
        }
    }

    /// Reads a request's CMCD: its headers ([`Cmcd::from_headers`]) and
    /// the query of its `target` ([`Cmcd::from_query`]), a header's value
    /// winning over the query's for the same key.
    pub fn from_request<'a>(target: &str, header: impl Fn(&str) -> Option<&'a str>) -> Cmcd {
        let headers = Cmcd::from_headers(header);
        match target.split_once('?') {
            Some((_, query)) => headers.or(Cmcd::from_query(query)),
            None => headers,
        }
    }
}

/// The first `CMCD` parameter of a query, `+` as a space, percent-decoded;
/// `None` when there is none.
fn query_list(query: &str) -> Result<Option<String>, ParseError> {
    let query = query.split('#').next().unwrap_or("");
    let query = query.strip_prefix('?').unwrap_or(query);
    match query.split('&').find_map(|p| p.strip_prefix("CMCD=")) {
        None => Ok(None),
        Some(raw) => percent_decode(&raw.replace('+', " "))
            .map(Some)
            .ok_or_else(|| ParseError::new("CMCD", Problem::BadEncoding, Some(raw))),
    }
}

/// The members of a list: split on `sep` outside double-quoted strings
/// (a string may hold commas; `\` escapes the next character in it).
pub(crate) fn split(list: &str, sep: char) -> impl Iterator<Item = &str> {
    let mut items = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in list.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == sep && !quoted => {
                items.push(&list[start..i]);
                start = i + sep.len_utf8();
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    items.into_iter()
}

/// A key: letters, digits, `.`, `_`, `-`, `*` (custom keys carry a
/// reverse-domain prefix: `com.example-myKey`).
pub(crate) fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'*'))
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn parse_integer(v: &str) -> Option<u64> {
    digits(v).then(|| v.parse().ok()).flatten()
}

/// A non-negative integer: digits only.
pub(crate) fn integer(v: Option<&str>) -> Result<u64, Problem> {
    parse_integer(v.ok_or(Problem::NoValue)?).ok_or(Problem::NotAnInteger)
}

/// A signed integer: `-?digits`.
fn signed(v: &str) -> Option<i64> {
    digits(v.strip_prefix('-').unwrap_or(v))
        .then(|| v.parse().ok())
        .flatten()
}

fn parse_decimal(v: &str) -> Option<f64> {
    let unsigned = v.strip_prefix('-').unwrap_or(v);
    let ok = match unsigned.split_once('.') {
        Some((i, f)) => digits(i) && digits(f),
        None => digits(unsigned),
    };
    ok.then(|| v.parse::<f64>().ok())
        .flatten()
        .filter(|f| f.is_finite())
}

/// A decimal: `-?digits[.digits]`, finite.
pub(crate) fn decimal(v: Option<&str>) -> Result<f64, Problem> {
    parse_decimal(v.ok_or(Problem::NoValue)?).ok_or(Problem::NotADecimal)
}

/// A quoted string, unescaped: `"` at both ends, `\` escaping the next
/// character, no other `"`.
fn parse_string(v: &str) -> Option<String> {
    let inner = v.strip_prefix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            '"' => return chars.next().is_none().then_some(out),
            c => out.push(c),
        }
    }
    None
}

/// A quoted string.
pub(crate) fn string(v: Option<&str>) -> Result<String, Problem> {
    parse_string(v.ok_or(Problem::NoValue)?).ok_or(Problem::NotAString)
}

/// One quoted string, or an inner list of them: `("a" "b")`, separated by
/// spaces.
fn strings(v: Option<&str>) -> Result<Vec<String>, Problem> {
    let v = v.ok_or(Problem::NoValue)?;
    let Some(inner) = v.strip_prefix('(') else {
        return parse_string(v).map(|s| vec![s]).ok_or(Problem::NotAString);
    };
    let inner = inner.strip_suffix(')').ok_or(Problem::NotAStringList)?;
    let mut out = Vec::new();
    for member in split(inner, ' ') {
        if !member.is_empty() {
            out.push(parse_string(member).ok_or(Problem::NotAStringList)?);
        }
    }
    Ok(out)
}

/// A boolean: a bare key, `?1` (true) or `?0` (false).
pub(crate) fn boolean(v: Option<&str>) -> Result<bool, Problem> {
    match v {
        None | Some("?1") => Ok(true),
        Some("?0") => Ok(false),
        Some(_) => Err(Problem::NotABoolean),
    }
}

/// One of a key's tokens.
pub(crate) fn token<T>(v: Option<&str>, from: fn(&str) -> Option<T>) -> Result<T, Problem> {
    from(v.ok_or(Problem::NoValue)?).ok_or(Problem::UnknownToken)
}

/// A token: a letter or `*`, then token characters, `:` and `/`.
pub(crate) fn is_token(v: &str) -> bool {
    let mut b = v.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'*')
        && b.all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&c))
}

/// The value of a key this crate does not know, by its syntax.
pub(crate) fn custom(v: Option<&str>) -> Result<Value, Problem> {
    let Some(v) = v else {
        return Ok(Value::True);
    };
    if v.starts_with('"') {
        parse_string(v).map(Value::String)
    } else if let Some(i) = signed(v) {
        Some(Value::Integer(i))
    } else if let Some(d) = parse_decimal(v) {
        Some(Value::Decimal(d))
    } else {
        is_token(v).then(|| Value::Token(v.to_string()))
    }
    .ok_or(Problem::BadValue)
}

/// Percent-decodes `s`; `None` on a bad escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
