//! Parsing: lists, the four headers, the query parameter. Lenient and
//! infallible (see the crate's note).

use crate::{Cmcd, Header, ObjectType, StreamType, StreamingFormat, Value};

impl Cmcd {
    /// Parses one CMCD list (a header's value, or the query parameter's
    /// value once decoded).
    pub fn parse(list: &str) -> Cmcd {
        let mut c = Cmcd::default();
        c.read(list);
        c
    }

    /// Reads one CMCD list into `self`: keys `self` already has keep their
    /// values (the first value of a key wins), malformed items are skipped.
    pub fn read(&mut self, list: &str) {
        for item in split(list) {
            let item = item.trim();
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            if valid_key(key) {
                self.read_item(key, value);
            }
        }
    }

    fn read_item(&mut self, key: &str, v: Option<&str>) {
        fn set<T>(field: &mut Option<T>, v: Option<T>) {
            if field.is_none() {
                *field = v;
            }
        }
        match key {
            "br" => set(&mut self.br, v.and_then(integer)),
            "d" => set(&mut self.d, v.and_then(integer)),
            "ot" => set(&mut self.ot, v.and_then(ObjectType::from_token)),
            "tb" => set(&mut self.tb, v.and_then(integer)),
            "bl" => set(&mut self.bl, v.and_then(integer)),
            "dl" => set(&mut self.dl, v.and_then(integer)),
            "mtp" => set(&mut self.mtp, v.and_then(integer)),
            "nor" => set(&mut self.nor, v.and_then(string)),
            "nrr" => set(&mut self.nrr, v.and_then(string)),
            "su" => self.su |= v.is_none(),
            "cid" => set(&mut self.cid, v.and_then(string)),
            "pr" => set(&mut self.pr, v.and_then(decimal)),
            "sf" => set(&mut self.sf, v.and_then(StreamingFormat::from_token)),
            "sid" => set(&mut self.sid, v.and_then(string)),
            "st" => set(&mut self.st, v.and_then(StreamType::from_token)),
            "v" => set(&mut self.v, v.and_then(integer)),
            "bs" => self.bs |= v.is_none(),
            "rtp" => set(&mut self.rtp, v.and_then(integer)),
            _ => {
                if !self.custom.contains_key(key) {
                    if let Some(v) = custom(v) {
                        self.custom.insert(key.to_string(), v);
                    }
                }
            }
        }
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

    /// Reads the query form from a URL's query (the part after `?`; a
    /// fragment is cut off): the first `CMCD` parameter, `+` as a space,
    /// percent-decoded. A parameter that does not decode (a bad escape,
    /// not UTF-8) gives nothing.
    pub fn from_query(query: &str) -> Cmcd {
        let query = query.split('#').next().unwrap_or("");
        let query = query.strip_prefix('?').unwrap_or(query);
        query
            .split('&')
            .find_map(|p| p.strip_prefix("CMCD="))
            .and_then(|v| percent_decode(&v.replace('+', " ")))
            .map(|list| Cmcd::parse(&list))
            .unwrap_or_default()
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

/// The items of a list: split on commas outside double-quoted strings
/// (a string may hold commas; `\` escapes the next character in it).
pub(crate) fn split(list: &str) -> impl Iterator<Item = &str> {
    let mut items = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in list.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    items.into_iter()
}

/// A key: letters, digits, `.`, `_`, `-`, `*` (custom keys carry a
/// reverse-domain prefix: `com.example-myKey`).
fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'*'))
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A non-negative integer: digits only.
fn integer(v: &str) -> Option<u64> {
    digits(v).then(|| v.parse().ok()).flatten()
}

/// A signed integer: `-?digits`.
fn signed(v: &str) -> Option<i64> {
    digits(v.strip_prefix('-').unwrap_or(v))
        .then(|| v.parse().ok())
        .flatten()
}

/// A decimal: `-?digits[.digits]`, finite.
fn decimal(v: &str) -> Option<f64> {
    let unsigned = v.strip_prefix('-').unwrap_or(v);
    let ok = match unsigned.split_once('.') {
        Some((i, f)) => digits(i) && digits(f),
        None => digits(unsigned),
    };
    ok.then(|| v.parse::<f64>().ok())
        .flatten()
        .filter(|f| f.is_finite())
}

/// A quoted string, unescaped: `"` at both ends, `\` escaping the next
/// character, no other `"`.
fn string(v: &str) -> Option<String> {
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

/// A token: a letter or `*`, then token characters, `:` and `/`.
fn token(v: &str) -> bool {
    let mut b = v.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'*')
        && b.all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&c))
}

/// The value of a key this crate does not know, by its syntax.
fn custom(v: Option<&str>) -> Option<Value> {
    let Some(v) = v else {
        return Some(Value::True);
    };
    if v.starts_with('"') {
        string(v).map(Value::String)
    } else if let Some(i) = signed(v) {
        Some(Value::Integer(i))
    } else if let Some(d) = decimal(v) {
        Some(Value::Decimal(d))
    } else {
        token(v).then(|| Value::Token(v.to_string()))
    }
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
