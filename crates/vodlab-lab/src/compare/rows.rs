//! `vodlab compare`'s rows and protocol: parsing `--servers` into server
//! configurations (checking each `vodlab-asap:POLICY` with the server's own
//! parser), the certificates and target of a TLS comparison, the rows of
//! servers skipped for the protocol, and the table's order.

use std::path::Path;

use vodlab_client::io::transport::Protocol;

use super::args::CompareArgs;
use super::error::CompareError;
use crate::capacity::SearchOutcome;
use crate::compare::ServerRow;
use crate::search::Answer;
use crate::servers::{ServerKind, ServerSpec, TlsFiles};
use crate::settings::SearchArgs;

/// The rows of `--servers`, each policy checked by `vodlab serve`'s parser
/// (errors name the row), and refused with a `--serve-arg` policy.
/// Without `--servers`, the protocol's [`ServerKind::defaults`].
pub(super) fn parse(a: &CompareArgs) -> Result<Vec<ServerSpec>, CompareError> {
    let rows = if a.servers.is_empty() {
        let p = a.search.transport.protocol.unwrap_or(Protocol::H1);
        let names: Vec<&str> = ServerKind::defaults(p).iter().map(|k| k.name()).collect();
        ServerSpec::parse_list(&names)?
    } else {
        ServerSpec::parse_list(&a.servers)?
    };
    if rows.is_empty() {
        return Err(CompareError::Refused(
            "--servers: name at least one server".into(),
        ));
    }
    let serve_policy = a.serve_args.iter().find(|s| {
        ["--prefetch-policy", "--prefetch"]
            .iter()
            .any(|f| s.as_str() == *f || s.starts_with(&format!("{f}=")))
    });
    for r in &rows {
        let Some(p) = &r.policy else { continue };
        p.parse::<vodlab_prefetch::PolicySpec>()
            .map_err(|source| CompareError::Policy {
                row: r.label.clone(),
                source,
            })?;
        if let Some(s) = serve_policy {
            return Err(CompareError::Refused(format!(
                "compare row `{}` sets the prefetch policy and so does --serve-arg {s}; give it in one place",
                r.label
            )));
        }
    }
    Ok(rows)
}

/// The policy as `vodlab serve` spells it (its parser's canonical form).
pub fn canonical_policy(r: &ServerSpec) -> Option<String> {
    r.policy.as_ref().map(|p| {
        p.parse::<vodlab_prefetch::PolicySpec>()
            .map_or_else(|_| p.clone(), |s| s.to_string())
    })
}

/// The protocol of a comparison: every server listens for it, the client
/// speaks it to `target`.
pub(super) struct Proto {
    /// h1, h2c, https or h2.
    pub protocol: Protocol,
    /// The run's certificates (TLS protocols).
    pub tls: Option<TlsFiles>,
    /// `http://ADDR` or `https://ADDR`.
    pub target: String,
    /// The search arguments with the client trusting the run's CA.
    pub search: SearchArgs,
}

impl Proto {
    /// For `a` on `addr`: over TLS, a CA and a leaf generated into
    /// `out/tls`, which the client trusts (unless `--insecure`).
    pub fn new(
        a: &CompareArgs,
        addr: std::net::SocketAddr,
        out: &Path,
    ) -> Result<Self, CompareError> {
        let protocol = a.search.transport.protocol.unwrap_or(Protocol::H1);
        let mut search = a.search.clone();
        let tls = if protocol.is_tls() {
            if a.search.transport.ca.is_some() {
                return Err(CompareError::Refused(format!(
                    "--ca: compare makes its own certificates for the servers it starts (in {}), and the client trusts their CA",
                    out.join("tls").display()
                )));
            }
            let f = TlsFiles::generate(&out.join("tls"))?;
            if !a.search.transport.insecure {
                search.transport.ca = Some(f.ca.clone());
            }
            Some(f)
        } else {
            None
        };
        Ok(Self {
            protocol,
            tls,
            target: format!(
                "{}://{addr}",
                if protocol.is_tls() { "https" } else { "http" }
            ),
            search,
        })
    }
}

/// A free loopback port for a proxy row's backend (`None`: the row has none).
pub(super) fn backend_addr(kind: ServerKind) -> Result<Option<std::net::SocketAddr>, CompareError> {
    if !kind.needs_backend() {
        return Ok(None);
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(CompareError::BackendPort)?;
    Ok(Some(l.local_addr()?))
}

/// The row of a server that was not run, with the reason.
pub fn skipped(r: &ServerSpec, reason: String) -> ServerRow {
    ServerRow {
        server: r.label.clone(),
        kind: Some(r.kind.name().into()),
        prefetch_policy: canonical_policy(r),
        serve_args: Vec::new(),
        answer: Answer::default(),
        outcome: SearchOutcome::Skipped { reason },
        at_capacity: None,
        at_overload: None,
        error: None,
        capacity_json: format!("{}/capacity.json", r.dir_name()),
    }
}

/// The table's order: servers in their usual order, a server's
/// configurations in the order given; rows kept from an earlier run and
/// not given now after the given ones of their server.
pub fn sort(rows: &mut [ServerRow], given: &[ServerSpec]) {
    rows.sort_by_key(|r| {
        let kind = r.kind.as_deref().unwrap_or(&r.server);
        (
            ServerKind::ALL.iter().position(|k| k.name() == kind),
            given
                .iter()
                .position(|g| g.label == r.server)
                .unwrap_or(usize::MAX),
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str) -> ServerRow {
        let s = ServerSpec::parse(label).unwrap();
        skipped(&s, "x".into())
    }

    #[test]
    fn rows_in_server_order_then_as_given() {
        let given = ServerSpec::parse_list(&[
            "nginx,vodlab-asap:fixed:4M,vodlab-asap:fixed:2M,vodlab-vanilla",
        ])
        .unwrap();
        let mut rows = vec![
            row("nginx"),
            row("vodlab-asap:fixed:2M"),
            row("vodlab-asap:auto"), // from an earlier run
            row("vodlab-vanilla"),
            row("vodlab-asap:fixed:4M"),
        ];
        // an old row without kind sorts by its server name
        rows.push(ServerRow {
            kind: None,
            ..row("lighttpd")
        });
        sort(&mut rows, &given);
        let names: Vec<&str> = rows.iter().map(|r| r.server.as_str()).collect();
        assert_eq!(
            names,
            [
                "vodlab-asap:fixed:4M",
                "vodlab-asap:fixed:2M",
                "vodlab-asap:auto",
                "vodlab-vanilla",
                "nginx",
                "lighttpd"
            ]
        );
    }

    #[test]
    fn policies_are_recorded_as_the_server_spells_them() {
        let r = ServerSpec::parse("vodlab-asap:sqrt:6M,ref=2095").unwrap();
        let p = canonical_policy(&r).unwrap();
        assert!(p.starts_with("fixed:"), "{p}");
        assert!(p.contains("ref=2095"), "{p}");
        assert_eq!(canonical_policy(&ServerSpec::parse("nginx").unwrap()), None);
    }
}
