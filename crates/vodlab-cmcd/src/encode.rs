//! Encoding: one list, the four headers, the query parameter; keys in
//! alphabetical order.

use crate::{Cmcd, Header, Value};

impl Cmcd {
    /// Every key set, as `(key, item)` in alphabetical order of the key
    /// (byte order), the item being `key=value` or the bare key of a true
    /// boolean. A decimal that is not finite is left out.
    pub fn items(&self) -> Vec<(&str, String)> {
        let mut out: Vec<(&str, String)> = Vec::new();
        let mut put = |key: &'static str, value: Option<String>| {
            if let Some(v) = value {
                out.push((key, format!("{key}={v}")));
            }
        };
        put("br", self.br.map(|n| n.to_string()));
        put("bl", self.bl.map(|n| n.to_string()));
        put("cid", self.cid.as_deref().map(quote));
        put("d", self.d.map(|n| n.to_string()));
        put("dl", self.dl.map(|n| n.to_string()));
        put("mtp", self.mtp.map(|n| n.to_string()));
        put("nor", self.nor.as_deref().map(quote));
        put("nrr", self.nrr.as_deref().map(quote));
        put("ot", self.ot.map(|t| t.token().to_string()));
        put("pr", self.pr.and_then(decimal));
        put("rtp", self.rtp.map(|n| n.to_string()));
        put("sf", self.sf.map(|t| t.token().to_string()));
        put("sid", self.sid.as_deref().map(quote));
        put("st", self.st.map(|t| t.token().to_string()));
        put("tb", self.tb.map(|n| n.to_string()));
        put("v", self.v.map(|n| n.to_string()));
        for (key, set) in [("bs", self.bs), ("su", self.su)] {
            if set {
                out.push((key, key.to_string()));
            }
        }
        for (key, v) in &self.custom {
            let item = match v {
                Value::True => Some(key.clone()),
                Value::Integer(i) => Some(format!("{key}={i}")),
                Value::Decimal(d) => decimal(*d).map(|d| format!("{key}={d}")),
                Value::String(s) => Some(format!("{key}={}", quote(s))),
                Value::Token(t) => Some(format!("{key}={t}")),
            };
            if let Some(item) = item {
                out.push((key.as_str(), item));
            }
        }
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// The whole list, every key in alphabetical order, comma-separated
    /// (the query parameter's value before percent-encoding).
    pub fn to_list(&self) -> String {
        join(self.items().into_iter().map(|(_, item)| item))
    }

    /// The header form: each header ([`Header::of`] its keys; keys not in
    /// the specification's table in `CMCD-Request`) with its list, in
    /// alphabetical order of the keys; headers without a key are left out.
    /// Headers in the order Object, Request, Session, Status.
    pub fn to_headers(&self) -> Vec<(Header, String)> {
        let items = self.items();
        let mut out = Vec::new();
        for h in [
            Header::Object,
            Header::Request,
            Header::Session,
            Header::Status,
        ] {
            let list = join(
                items
                    .iter()
                    .filter(|(k, _)| Header::of(k) == h)
                    .map(|(_, item)| item.clone()),
            );
            if !list.is_empty() {
                out.push((h, list));
            }
        }
        out
    }

    /// The query form: `CMCD=` and the list, percent-encoded (every byte
    /// but letters, digits, `-`, `.`, `_` and `~`). `CMCD=` alone when no
    /// key is set (a player sends nothing then: [`Cmcd::is_empty`]).
    pub fn to_query(&self) -> String {
        let list = self.to_list();
        let mut out = String::with_capacity(5 + list.len() * 2);
        out.push_str("CMCD=");
        for b in list.bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                out.push(b as char);
            } else {
                out.push('%');
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 15)]));
            }
        }
        out
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn join(items: impl Iterator<Item = String>) -> String {
    let mut out = String::new();
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&item);
    }
    out
}

/// A string in double quotes, `"` and `\` escaped.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A decimal with its point (`2.0`, not `2`), `None` when not finite.
fn decimal(d: f64) -> Option<String> {
    if !d.is_finite() {
        return None;
    }
    let mut s = d.to_string();
    if !s.contains('.') {
        s.push_str(".0");
    }
    Some(s)
}
