//! The rows of `vodlab compare --servers`: a server, and for `vodlab serve`
//! in asap mode its prefetch policy, each row its own configuration (its
//! own name in the table, its own server process).
//!
//! Grammar (one row):
//!
//! ```text
//! ROW    := SERVER | "vodlab-asap:" POLICY | "nghttpx:" POLICY
//! SERVER := vodlab-asap | vodlab-vanilla | nginx | apache2 | lighttpd | nghttpx
//! POLICY := fixed:SIZE[,KEY=VALUE...]    fixed size (2M, 512K, ...)
//!         | sqrt:SIZE[,ref=KBPS]         square-root sizes around KBPS
//!         | proportional:SIZE[,ref=KBPS] (KBPS 2,000 unless given)
//!         | auto[:KEY=VALUE,...]         thesis ch. 4's automatic size
//!         | first-grow:MAX | first-grow-sr:MAX
//! ```
//!
//! POLICY is `vodlab serve --prefetch-policy`'s own syntax (docs/serve.md),
//! checked by the one policy parser ([`vodlab_prefetch::PolicySpec`]) and
//! handed to the server as written. A list splits on
//! commas, except that a `KEY=VALUE` piece (no colon before the `=`: a
//! policy option) belongs to the row before it:
//! `vodlab-asap:fixed:6M,ref=2095,nginx` is two rows.

use super::{ServerError, ServerKind};

/// One row of the comparison: which server, configured how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The row's name in the table and compare.json (the row as given,
    /// trimmed).
    pub label: String,
    /// The server program.
    pub kind: ServerKind,
    /// `vodlab serve --prefetch-policy` of a `vodlab-asap:POLICY` row (or
    /// of nghttpx's backend, `nghttpx:POLICY`), as written; `None`: the
    /// server's default.
    pub policy: Option<String>,
}

impl ServerSpec {
    /// Parses one row, with errors naming it.
    pub fn parse(row: &str) -> Result<Self, ServerError> {
        let label = row.trim();
        let bad = |why: String| ServerError::Row {
            row: label.to_string(),
            why,
        };
        if label.is_empty() {
            return Err(bad("an empty row (two commas in a row?)".into()));
        }
        let (name, policy) = match label.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (label, None),
        };
        let kind = ServerKind::parse(name).map_err(|e| bad(e.to_string()))?;
        let policy = match policy {
            None => None,
            Some(_) if !kind.runs_asap() => {
                return Err(bad(format!(
                    "{name} takes no prefetch policy (only vodlab-asap:POLICY and \
                     nghttpx:POLICY rows do; vodlab-vanilla never prefetches)"
                )))
            }
            Some(p) => Some(Self::policy_text(p).map_err(bad)?),
        };
        Ok(Self {
            label: label.to_string(),
            kind,
            policy,
        })
    }

    /// The server's `--prefetch-policy` text of a row's POLICY.
    fn policy_text(p: &str) -> Result<String, String> {
        p.parse::<vodlab_prefetch::PolicySpec>()
            .map(|_| p.trim().to_string())
            .map_err(|e| e.why)
    }

    /// Parses `--servers` values: each split on commas, a `KEY=VALUE` piece
    /// joined to the row before it (also across values, so a list a caller
    /// already split on commas, as `vodlab bench` does, parses the same);
    /// two rows of one label are refused.
    pub fn parse_list<S: AsRef<str>>(values: &[S]) -> Result<Vec<Self>, ServerError> {
        let mut rows: Vec<String> = Vec::new();
        for v in values {
            for piece in v.as_ref().split(',') {
                match rows.last_mut() {
                    // KEY=VALUE (no colon before the `=`): a policy option
                    Some(last) if piece.split_once('=').is_some_and(|(k, _)| !k.contains(':')) => {
                        last.push(',');
                        last.push_str(piece.trim());
                    }
                    _ => rows.push(piece.trim().to_string()),
                }
            }
        }
        let mut out: Vec<Self> = Vec::new();
        for r in rows {
            let s = Self::parse(&r)?;
            if out.iter().any(|o| o.label == s.label) {
                return Err(ServerError::Row {
                    row: s.label,
                    why: "given twice (every row needs its own name)".into(),
                });
            }
            if let Some(o) = out.iter().find(|o| o.dir_name() == s.dir_name()) {
                return Err(ServerError::Row {
                    row: s.label.clone(),
                    why: format!(
                        "its directory name {} is also {}'s; rename one",
                        s.dir_name(),
                        o.label
                    ),
                });
            }
            out.push(s);
        }
        Ok(out)
    }

    /// The row's directory under the comparison's output: its label with
    /// every character outside `[A-Za-z0-9._-]` replaced by `_` (a plain
    /// server's directory is its name, as before rows had policies).
    pub fn dir_name(&self) -> String {
        self.label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// Arguments the row adds to `vodlab serve`.
    pub fn serve_args(&self) -> Vec<String> {
        match &self.policy {
            Some(p) => vec!["--prefetch-policy".into(), p.clone()],
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(s: &str) -> ServerSpec {
        ServerSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> String {
        ServerSpec::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn plain_servers_and_policy_rows() {
        let n = row("nginx");
        assert_eq!((n.kind, n.policy.as_deref()), (ServerKind::Nginx, None));
        assert_eq!(n.dir_name(), "nginx");
        assert!(n.serve_args().is_empty());
        let f = row(" vodlab-asap:fixed:2M ");
        assert_eq!(f.label, "vodlab-asap:fixed:2M");
        assert_eq!(f.kind, ServerKind::VodlabAsap);
        assert_eq!(f.policy.as_deref(), Some("fixed:2M"));
        assert_eq!(f.serve_args(), ["--prefetch-policy", "fixed:2M"]);
        assert_eq!(f.dir_name(), "vodlab-asap_fixed_2M");
        assert_eq!(row("vodlab-asap:auto").policy.as_deref(), Some("auto"));
        assert_eq!(
            row("vodlab-asap:auto:interval=120,step=1M")
                .policy
                .as_deref(),
            Some("auto:interval=120,step=1M")
        );
        let s = row("vodlab-asap:sqrt:6M,ref=2095");
        assert_eq!(s.policy.as_deref(), Some("sqrt:6M,ref=2095"));
        assert_eq!(s.label, "vodlab-asap:sqrt:6M,ref=2095");
        // chapter 5's reference rate unless given
        assert_eq!(
            row("vodlab-asap:sqrt:6M").policy.as_deref(),
            Some("sqrt:6M")
        );
        assert_eq!(
            row("vodlab-asap:first-grow-sr:16M").policy.as_deref(),
            Some("first-grow-sr:16M")
        );
        assert_eq!(row("vodlab-vanilla").kind, ServerKind::VodlabVanilla);
    }

    #[test]
    fn bad_rows_are_named() {
        for (bad, says) in [
            ("", "empty row"),
            ("iis", "unknown server `iis`"),
            ("nginx:fixed:2M", "nginx takes no prefetch policy"),
            ("vodlab-vanilla:fixed:2M", "vanilla never prefetches"),
            ("vodlab-asap:lru:2M", "unknown policy `lru`"),
            ("vodlab-asap:fixed", "`fixed` needs a size"),
            ("vodlab-asap:sqrt:ref=2095", "`sqrt` needs a size"),
            ("vodlab-asap:auto:step=x", "step"),
        ] {
            let e = err(bad);
            assert!(
                e.contains(says) && e.contains(&format!("`{}`", bad.trim())),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn lists_split_on_commas_but_keep_policy_options() {
        let l = ServerSpec::parse_list(&[
            "vodlab-asap:fixed:2M,vodlab-asap:fixed:4M",
            "vodlab-asap:fixed:6M,ref=2095,scale=0.45,nginx",
            "vodlab-asap:auto:interval=120",
        ])
        .unwrap();
        let labels: Vec<&str> = l.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "vodlab-asap:fixed:2M",
                "vodlab-asap:fixed:4M",
                "vodlab-asap:fixed:6M,ref=2095,scale=0.45",
                "nginx",
                "vodlab-asap:auto:interval=120"
            ]
        );
        assert_eq!(l[2].policy.as_deref(), Some("fixed:6M,ref=2095,scale=0.45"));
        let e = ServerSpec::parse_list(&["nginx,vodlab-asap:fixed:2M,nginx"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`nginx`") && e.contains("given twice"), "{e}");
        let e = ServerSpec::parse_list(&[
            "vodlab-asap:fixed:2M,ref=+2000,vodlab-asap:fixed:2M,ref= 2000",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("directory name"), "{e}");
        // a list already split on commas parses the same
        let split = ServerSpec::parse_list(&[
            "vodlab-asap:fixed:6M",
            "ref=2095",
            "nginx",
            "vodlab-asap:auto:interval=120",
            "step=1M",
        ])
        .unwrap();
        assert_eq!(split[0].policy.as_deref(), Some("fixed:6M,ref=2095"));
        assert_eq!(
            split[2].policy.as_deref(),
            Some("auto:interval=120,step=1M")
        );
        assert_eq!(split.len(), 3);
        // in one value too
        let one = ServerSpec::parse_list(&["nginx,vodlab-asap:auto:busy=0.5,evict=0.1"]).unwrap();
        assert_eq!(one[1].policy.as_deref(), Some("auto:busy=0.5,evict=0.1"));
        // a KEY=VALUE piece first has no row to join
        let e = ServerSpec::parse_list(&["ref=2095"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`ref=2095`"), "{e}");
    }
}
