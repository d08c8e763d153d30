//! Encoding: one list, the four headers, the query parameter; keys in
//! alphabetical order.

use crate::{Cmcd, Header, Value};

impl Cmcd {
    /// Every key set, as `(key, item)` in alphabetical order of the key
    /// (byte order), the item being `key=value` or the bare key of a true
    /// boolean. A decimal that is not finite is left out.
    ///
    /// `v=2` is added when a version-2 key is set and `v` is not
    /// ([`Cmcd::versioned`]).
    pub fn items(&self) -> Vec<(&str, String)> {
        let mut out: Vec<(&str, String)> = Vec::new();
        let mut put = |key: &'static str, value: Option<String>| {
            if let Some(v) = value {
                out.push((key, format!("{key}={v}")));
            }
        };
        let int = |n: Option<u64>| n.map(|n| n.to_string());
        let string = |s: &Option<String>| s.as_deref().map(quote);
        put("br", int(self.br));
        put("d", int(self.d));
        put("ot", self.ot.map(|t| t.token().to_string()));
        put("tb", int(self.tb));
        put("tpb", int(self.tpb));
        put("bl", int(self.bl));
        put("dl", int(self.dl));
        put("df", int(self.df));
        put("ltc", int(self.ltc));
        put("mtp", int(self.mtp));
        put(
            "nor",
            match self.nor.as_slice() {
                [] => None,
                [one] => Some(quote(one)),
                many => Some(format!(
                    "({})",
                    many.iter().map(|s| quote(s)).collect::<Vec<_>>().join(" ")
                )),
            },
        );
        put("nrr", string(&self.nrr));
        put("pb", int(self.pb));
        put("rc", int(self.rc));
        put("sn", int(self.sn));
        put("ts", int(self.ts));
        put("ttfb", int(self.ttfb));
        put("ttlb", int(self.ttlb));
        put("url", string(&self.url));
        put("cdn", string(&self.cdn));
        put("cid", string(&self.cid));
        put("msd", int(self.msd));
        put("pr", self.pr.and_then(decimal));
        put("sf", self.sf.map(|t| t.token().to_string()));
        put("sid", string(&self.sid));
        put("st", self.st.map(|t| t.token().to_string()));
        put("v", int(self.v.or_else(|| self.is_v2().then_some(2))));
        put("e", self.e.map(|t| t.token().to_string()));
        put("rtp", int(self.rtp));
        put("sta", self.sta.map(|t| t.token().to_string()));
        for (key, set) in [("bg", self.bg), ("bs", self.bs), ("su", self.su)] {
            if set {
                out.push((key, key.to_string()));
            }
        }
        for (key, v) in &self.custom {
            if let Some(item) = custom_item(key, v) {
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

/// `key=value` for a key this crate does not know (`key` alone for
/// [`Value::True`]); `None` for a decimal that is not finite.
pub(crate) fn custom_item(key: &str, v: &Value) -> Option<String> {
    match v {
        Value::True => Some(key.to_string()),
        Value::Integer(i) => Some(format!("{key}={i}")),
        Value::Decimal(d) => decimal(*d).map(|d| format!("{key}={d}")),
        Value::String(s) => Some(format!("{key}={}", quote(s))),
        Value::Token(t) => Some(format!("{key}={t}")),
    }
}

pub(crate) fn join(items: impl Iterator<Item = String>) -> String {
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
pub(crate) fn quote(s: &str) -> String {
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
pub(crate) fn decimal(d: f64) -> Option<String> {
    if !d.is_finite() {
        return None;
    }
    let mut s = d.to_string();
    if !s.contains('.') {
        s.push_str(".0");
    }
    Some(s)
}
