//! A network lab on one machine: a network namespace for the server and
//! one per client host, joined by veth pairs on a bridge that lives in a
//! namespace of its own, links shaped in the kernel with `htb` (this kernel
//! has no `netem` or `fq`, so there is no emulated delay; rates and
//! queues), and random loss by a classic-BPF program on a `clsact` hook
//! ([`loss`]; `act_gact`'s random drop is not built in this kernel either).
//!
//! Nothing touches the machine's own network namespace: every address,
//! route, bridge and qdisc is inside a namespace the lab created, and
//! [`Lab::down`] (also on drop) deletes those namespaces, which removes
//! their interfaces. Namespaces are named `vl-NAME-hub`, `vl-NAME-srv`,
//! `vl-NAME-cI`; a lab left by a crash is found by that prefix and the
//! owner file `/run/vodlab/lab-NAME.pid` (its process gone) and removed by
//! the next [`Lab::up`] of that name.
//!
//! Addresses (inside the lab only): server `10.77.0.1`, client host I
//! `10.77.0.(10 + I)`, a /24.
//!
//! The plan ([`plan_up`]) is pure: the `ip`/`tc` argument lists, tested
//! without root; [`Lab`] runs them (iproute2).

use std::fmt;
use std::fs;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::str::FromStr;

use thiserror::Error;

pub mod flow;
pub mod loss;
mod run;

pub use loss::Loss;
pub use run::{host_ns, run_lab, spawn_in, stop, LabRunError, LabRunObserver, RunArgs, ShapeArgs};

/// Most client namespaces one lab makes.
pub const MAX_CLIENTS: usize = 200;
/// The server's address inside the lab.
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

/// A lab's errors.
#[derive(Debug, Error)]
pub enum LabError {
    /// Namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN).
    #[error("vodlab lab needs root (it creates network namespaces)")]
    NotRoot,
    /// A setting is out of range.
    #[error("{key}: {why}")]
    Invalid {
        /// The setting.
        key: &'static str,
        /// What is wrong.
        why: String,
    },
    /// Another live process owns a lab of this name.
    #[error("lab {name:?} is in use by process {pid} (vodlab lab down --name {name} ends it)")]
    InUse {
        /// The lab's name.
        name: String,
        /// Its owner.
        pid: u32,
    },
    /// A command of the plan failed.
    #[error("`{cmd}` failed: {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// What it printed.
        stderr: String,
    },
    /// Running a command failed (iproute2 missing?).
    #[error("running `{cmd}`: {source} (is iproute2 installed?)")]
    Spawn {
        /// The command line.
        cmd: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The owner file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// A link rate in bits per second, written in vodlab's one rate grammar
/// ([`vodlab_units::parse_rate`], docs/units.md): bits/s with `bit` and an
/// SI prefix (`1gbit`, `100Mbit`, `3.5mbit`), or bytes/s as a size
/// (`55MB/s` = 440 Mbit/s). `tc`'s own `55mbps` (bytes/s to tc, bits/s to
/// most readers) is refused as ambiguous. 8 kbit/s to 100 Gbit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rate(pub u64);

impl Rate {
    /// Bits per second.
    pub fn bits_per_s(self) -> u64 {
        self.0
    }
}

impl FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bits = vodlab_units::parse_rate(s)
            .map_err(|e| e.to_string())?
            .bits_per_s();
        if !(8_000..=100_000_000_000).contains(&bits) {
            return Err(format!(
                "`{}`: a link rate must be 8 kbit to 100 gbit per second",
                s.trim()
            ));
        }
        Ok(Rate(bits))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b % 1_000_000_000 == 0 {
            write!(f, "{}gbit", b / 1_000_000_000)
        } else if b % 1_000_000 == 0 {
            write!(f, "{}mbit", b / 1_000_000)
        } else if b % 1_000 == 0 {
            write!(f, "{}kbit", b / 1_000)
        } else {
            write!(f, "{b}bit")
        }
    }
}

/// What a lab is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct LabSpec {
    /// The lab's name (letters, digits, `-`; at most 8 characters, so the
    /// namespace names stay short).
    pub name: String,
    /// Client host namespaces (1 to [`MAX_CLIENTS`]).
    pub clients: usize,
    /// The server's egress (its uplink toward every client), if shaped:
    /// the bottleneck of a server-side experiment.
    pub server_egress: Option<Rate>,
    /// Each client host's downstream (the hub toward the client), if shaped.
    pub client_down: Option<Rate>,
    /// Each client host's upstream, if shaped.
    pub client_up: Option<Rate>,
    /// MTU of every link (default 1500, an Ethernet's; loopback's 64 KiB
    /// would hide per-packet costs).
    pub mtu: u32,
    /// Each TCP connection's downstream on client host I, shaped on its own
    /// ([`flow`]): one rate for every host, or one per host (host I gets
    /// entry I). Empty: none. Excludes `client_down`.
    pub flow_down: Vec<Rate>,
    /// Each TCP connection's upstream on client host I, as `flow_down`.
    /// Excludes `client_up`.
    pub flow_up: Vec<Rate>,
    /// Connections a client host may have shaped at once under `flow_down`
    /// or `flow_up` (a multiple of 256, 256 to [`flow::MAX_FLOWS`]; its
    /// ephemeral ports are that many from [`flow::PORT_BASE`]).
    pub flows_per_host: u16,
    /// Random loss of every packet toward each client host (TCP and UDP
    /// alike), if any ([`loss`]).
    pub loss_down: Option<Loss>,
    /// Random loss of every packet from each client host, if any.
    pub loss_up: Option<Loss>,
}

impl LabSpec {
    /// A lab of `clients` unshaped client hosts.
    pub fn new(name: &str, clients: usize) -> Self {
        Self {
            name: name.to_string(),
            clients,
            server_egress: None,
            client_down: None,
            client_up: None,
            mtu: 1500,
            flow_down: Vec::new(),
            flow_up: Vec::new(),
            flows_per_host: flow::FLOWS,
            loss_down: None,
            loss_up: None,
        }
    }

    /// Checks the name, the client count and the MTU.
    pub fn validate(&self) -> Result<(), LabError> {
        let bad = |key, why: &str| {
            Err(LabError::Invalid {
                key,
                why: why.to_string(),
            })
        };
        if self.name.is_empty()
            || self.name.len() > 8
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return bad("name", "1 to 8 letters, digits or '-'");
        }
        if !(1..=MAX_CLIENTS).contains(&self.clients) {
            return bad("clients", "must be 1 to 200");
        }
        if !(576..=65_535).contains(&self.mtu) {
            return bad("mtu", "must be 576 to 65535");
        }
        if !flow::valid_flows(self.flows_per_host) {
            return bad(
                "flows_per_host",
                &format!("must be a multiple of 256 from 256 to {}", flow::MAX_FLOWS),
            );
        }
        for (key, rates, whole) in [
            ("flow_down", &self.flow_down, self.client_down.is_some()),
            ("flow_up", &self.flow_up, self.client_up.is_some()),
        ] {
            if rates.len() > 1 && rates.len() != self.clients {
                return bad(key, "give one rate, or one per client host");
            }
            if whole && !rates.is_empty() {
                return bad(
                    key,
                    "shapes the same link as --client-down/--client-up: give one of them",
                );
            }
        }
        Ok(())
    }

    /// What a user of this lab should know before trusting its figures
    /// (printed by `vodlab lab up` and `lab run`); empty when nothing.
    ///
    /// An MTU above Ethernet's with shaping: htb lets a whole frame through
    /// while its class has tokens, so a response that fits in one frame
    /// arrives at once, unshaped. Measured 2026-12-07 (16 KiB responses at
    /// 2 Mbit/s per connection, `scripts/bench-kernel-shaping.sh`,
    /// experiments/shaped-session-cpu/2026-12-07-mtu): response p50 60.5
    /// ms at MTU 1500 (65.5 ms is the rate's), 29.8 ms at 9000, 0.1 ms at
    /// 65535.
    pub fn notes(&self) -> Vec<String> {
        let shaped = self.server_egress.is_some()
            || self.client_down.is_some()
            || self.client_up.is_some()
            || !self.flow_down.is_empty()
            || !self.flow_up.is_empty();
        let mut notes = Vec::new();
        if shaped && self.mtu > 1500 {
            notes.push(format!(
                "--mtu {}: htb passes a whole frame while its class has tokens, so a \
                 response of up to {} bytes arrives at once, not at the shaped rate \
                 (16 KiB at 2 Mbit/s: 0.1 ms at MTU 65535 against 60 ms at 1500); \
                 keep 1500 where the shaping of short responses matters",
                self.mtu, self.mtu
            ));
        }
        notes
    }

    /// Client host `i`'s per-connection downstream rate, if any.
    pub fn flow_down_of(&self, i: usize) -> Option<Rate> {
        pick(&self.flow_down, i)
    }

    /// Client host `i`'s per-connection upstream rate, if any.
    pub fn flow_up_of(&self, i: usize) -> Option<Rate> {
        pick(&self.flow_up, i)
    }

    /// The hub namespace (holds the bridge).
    pub fn hub(&self) -> String {
        format!("vl-{}-hub", self.name)
    }

    /// The server's namespace.
    pub fn server_ns(&self) -> String {
        format!("vl-{}-srv", self.name)
    }

    /// Client host `i`'s namespace.
    pub fn client_ns(&self, i: usize) -> String {
        format!("vl-{}-c{i}", self.name)
    }

    /// Client host `i`'s address.
    pub fn client_addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, 0, 10 + i as u8)
    }

    /// Every namespace of the lab, the hub first.
    pub fn namespaces(&self) -> Vec<String> {
        let mut v = vec![self.hub(), self.server_ns()];
        v.extend((0..self.clients).map(|i| self.client_ns(i)));
        v
    }
}

fn pick(rates: &[Rate], i: usize) -> Option<Rate> {
    match rates {
        [] => None,
        [r] => Some(*r),
        v => v.get(i).copied(),
    }
}

/// One command of a plan: `ip` or `tc` and its arguments.
pub type Cmd = Vec<String>;

fn cmd(parts: &[&str]) -> Cmd {
    parts.iter().map(|s| s.to_string()).collect()
}

/// `htb` on `dev` in `ns` limiting everything it sends to `rate`: one class
/// that every packet falls into, with tc's default burst for the rate.
fn shape(ns: &str, dev: &str, rate: Rate) -> Vec<Cmd> {
    let r = rate.to_string();
    vec![
        cmd(&[
            "tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default",
            "1",
        ]),
        cmd(&[
            "tc", "-n", ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
            "rate", &r, "ceil", &r,
        ]),
    ]
}

/// The commands that build the lab, in order (the spec validated first).
pub fn plan_up(spec: &LabSpec) -> Result<Vec<Cmd>, LabError> {
    spec.validate()?;
    let hub = spec.hub();
    let mtu = spec.mtu.to_string();
    let mut v = vec![
        cmd(&["ip", "netns", "add", &hub]),
        cmd(&["ip", "-n", &hub, "link", "set", "lo", "up"]),
        cmd(&["ip", "-n", &hub, "link", "add", "br0", "type", "bridge"]),
        cmd(&["ip", "-n", &hub, "link", "set", "br0", "up"]),
    ];
    let mut hosts = vec![(spec.server_ns(), "s".to_string(), SERVER_ADDR)];
    hosts.extend(
        (0..spec.clients).map(|i| (spec.client_ns(i), format!("c{i}"), spec.client_addr(i))),
    );
    for (ns, port, addr) in &hosts {
        let a = format!("{addr}/24");
        v.extend([
            cmd(&["ip", "netns", "add", ns]),
            cmd(&["ip", "-n", ns, "link", "set", "lo", "up"]),
            cmd(&[
                "ip", "link", "add", "eth0", "netns", ns, "mtu", &mtu, "type", "veth", "peer",
                "name", port, "netns", &hub, "mtu", &mtu,
            ]),
            cmd(&["ip", "-n", ns, "addr", "add", &a, "dev", "eth0"]),
            cmd(&["ip", "-n", ns, "link", "set", "eth0", "up"]),
            cmd(&["ip", "-n", &hub, "link", "set", port, "master", "br0"]),
            cmd(&["ip", "-n", &hub, "link", "set", port, "up"]),
        ]);
    }
    if let Some(r) = spec.server_egress {
        v.extend(shape(&spec.server_ns(), "eth0", r));
    }
    // one packet per segment from the server: per-flow rates, and a random
    // drop that takes one packet, not a 64 KiB GSO burst of them
    if !spec.flow_down.is_empty() || spec.loss_down.is_some() {
        v.push(flow::no_gso(&spec.server_ns()));
    }
    for i in 0..spec.clients {
        let ns = spec.client_ns(i);
        if let Some(r) = spec.client_down {
            v.extend(shape(&hub, &format!("c{i}"), r));
        }
        if let Some(r) = spec.client_up {
            v.extend(shape(&ns, "eth0", r));
        }
        // the egress hook runs before the root qdisc: a dropped packet
        // never takes a rate's tokens
        if let Some(l) = spec.loss_down {
            v.extend(loss::drop_random(&hub, &format!("c{i}"), l));
        }
        if let Some(l) = spec.loss_up {
            v.extend(loss::drop_random(&ns, "eth0", l));
        }
        let (down, up) = (spec.flow_down_of(i), spec.flow_up_of(i));
        if down.is_some() || up.is_some() {
            v.extend(flow::port_range(&ns, spec.flows_per_host));
        }
        if let Some(r) = down {
            v.extend(flow::per_flow(
                &hub,
                &format!("c{i}"),
                r,
                flow::Direction::Down,
                spec.flows_per_host,
            ));
        }
        if up.is_some() || spec.loss_up.is_some() {
            v.push(flow::no_gso(&ns));
        }
        if let Some(r) = up {
            v.extend(flow::per_flow(
                &ns,
                "eth0",
                r,
                flow::Direction::Up,
                spec.flows_per_host,
            ));
        }
    }
    Ok(v)
}

fn owner_file(name: &str) -> PathBuf {
    PathBuf::from(format!("/run/vodlab/lab-{name}.pid"))
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists
    pid > 0 && unsafe { libc::kill(pid as i32, 0) } == 0
}

fn run(c: &Cmd) -> Result<String, LabError> {
    run_with_input(c, None)
}

/// Runs `c`, writing `input` (if any) to its standard input.
fn run_with_input(c: &Cmd, input: Option<&str>) -> Result<String, LabError> {
    use std::io::Write;
    use std::process::Stdio;
    let line = c.join(" ");
    let spawn_err = |source| LabError::Spawn {
        cmd: line.clone(),
        source,
    };
    let mut child = Command::new(&c[0])
        .args(&c[1..])
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_err)?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).map_err(spawn_err)?;
    }
    let out = child.wait_with_output().map_err(spawn_err)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(LabError::Command {
            cmd: line,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The namespaces on this machine whose names are the lab `name`'s.
pub fn existing_namespaces(name: &str) -> Result<Vec<String>, LabError> {
    let prefix = format!("vl-{name}-");
    let list = run(&cmd(&["ip", "netns", "list"]))?;
    Ok(list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect())
}

/// A lab that exists: removed by [`Lab::down`] or when dropped.
#[derive(Debug)]
pub struct Lab {
    spec: LabSpec,
    /// Whether dropping it removes it (false after [`Lab::detach`]).
    owned: bool,
}

impl Lab {
    /// Builds the lab. A stale lab of the same name (its owner gone) is
    /// removed first; a live one is [`LabError::InUse`]. A failure half-way
    /// removes what was built.
    pub fn up(spec: LabSpec) -> Result<Lab, LabError> {
        let plan = plan_up(&spec)?;
        if !crate::hwbox::is_root() {
            return Err(LabError::NotRoot);
        }
        let owner = owner_file(&spec.name);
        if let Some(pid) = fs::read_to_string(&owner)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            if alive(pid) && pid != std::process::id() {
                return Err(LabError::InUse {
                    name: spec.name.clone(),
                    pid,
                });
            }
        }
        for ns in existing_namespaces(&spec.name)? {
            eprintln!("vodlab lab: removing stale namespace {ns}");
            let _ = run(&cmd(&["ip", "netns", "del", &ns]));
        }
        let lab = Lab { spec, owned: true };
        fs::create_dir_all("/run/vodlab").map_err(|source| LabError::Io {
            path: "/run/vodlab".into(),
            source,
        })?;
        fs::write(&owner, std::process::id().to_string()).map_err(|source| LabError::Io {
            path: owner,
            source,
        })?;
        for (c, input) in flow::batches(&plan) {
            // on error `lab` drops and removes what exists
            run_with_input(&c, input.as_deref())?;
        }
        Ok(lab)
    }

    /// Takes over an existing lab (for `vodlab lab down` and `exec`).
    pub fn attach(spec: LabSpec) -> Lab {
        Lab { spec, owned: true }
    }

    /// Leaves the lab in place when this value is dropped (`vodlab lab
    /// up` hands it to later commands); records no owner, so the next `up`
    /// of the name replaces it.
    pub fn detach(mut self) -> LabSpec {
        self.owned = false;
        let _ = fs::remove_file(owner_file(&self.spec.name));
        self.spec.clone()
    }

    /// The spec it was built from.
    pub fn spec(&self) -> &LabSpec {
        &self.spec
    }

    /// A command run inside namespace `ns` (`ip netns exec NS PROGRAM ...`).
    pub fn command_in(ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }

    /// Removes every namespace of the lab (and so its links and qdiscs);
    /// returns the names removed.
    pub fn down(mut self) -> Result<Vec<String>, LabError> {
        self.owned = false;
        remove(&self.spec.name)
    }
}

/// Removes the lab `name`'s namespaces and owner file.
pub fn remove(name: &str) -> Result<Vec<String>, LabError> {
    let names = existing_namespaces(name)?;
    let mut first_err = None;
    for ns in &names {
        if let Err(e) = run(&cmd(&["ip", "netns", "del", ns])) {
            first_err.get_or_insert(e);
        }
    }
    let _ = fs::remove_file(owner_file(name));
    match first_err {
        Some(e) => Err(e),
        None => Ok(names),
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.owned {
            if let Err(e) = remove(&self.spec.name) {
                eprintln!("vodlab lab: removing lab {}: {e}", self.spec.name);
            }
        }
    }
}

/// Runs `f` on a thread that has entered namespace `ns`'s network stack
/// (`setns(2)` on `/run/netns/NS`; only that thread moves), e.g. to check
/// from a client host that the server listens.
pub fn in_namespace<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<T> {
    use std::os::unix::io::AsRawFd;
    let file = fs::File::open(format!("/run/netns/{ns}"))?;
    std::thread::spawn(move || {
        // SAFETY: an open namespace descriptor; only this thread changes
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(f())
    })
    .join()
    .map_err(|_| std::io::Error::other("namespace thread panicked"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_in_tc_units() {
        assert_eq!("1gbit".parse::<Rate>(), Ok(Rate(1_000_000_000)));
        assert_eq!("400kbit".parse::<Rate>(), Ok(Rate(400_000)));
        assert_eq!("55MB/s".parse::<Rate>(), Ok(Rate(440_000_000)));
        assert_eq!("2.5MBit".parse::<Rate>(), Ok(Rate(2_500_000)));
        assert_eq!("10.46mbit".parse::<Rate>(), Ok(Rate(10_460_000)));
        assert_eq!("1e3mbit".parse::<Rate>(), Ok(Rate(1_000_000_000)));
        // bytes/s as a size, the same grammar as `vodlab serve --link-capacity`
        assert_eq!("1M".parse::<Rate>(), Ok(Rate(8 << 20)));
        assert_eq!("125000".parse::<Rate>(), Ok(Rate(1_000_000)));
        // tc's byte unit is ambiguous: refused, naming both spellings
        let e = "55mbps".parse::<Rate>().unwrap_err();
        assert!(e.contains("55mbit") && e.contains("55MB/s"), "{e}");
        assert_eq!(Rate(1_000_000_000).to_string(), "1gbit");
        assert_eq!(Rate(2_500_000).to_string(), "2500kbit");
        for bad in [
            "", "fast", "10", "10 m bit", "-1mbit", "1kbit", "1000gbit", "8kbps",
        ] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
    }

    #[test]
    fn specs_are_checked() {
        let mut s = LabSpec::new("t1", 4);
        assert!(s.validate().is_ok());
        for name in ["", "toolongname", "a b", "x/y", "ü"] {
            s.name = name.into();
            assert!(
                matches!(s.validate(), Err(LabError::Invalid { key: "name", .. })),
                "{name}"
            );
        }
        s.name = "ok".into();
        s.clients = 0;
        assert!(matches!(
            s.validate(),
            Err(LabError::Invalid { key: "clients", .. })
        ));
        s.clients = 201;
        assert!(plan_up(&s).is_err());
    }

    #[test]
    fn a_large_mtu_under_shaping_is_noted_and_nothing_else_is() {
        let mut s = LabSpec::new("n", 2);
        s.mtu = 65_535;
        // unshaped: a large MTU is loopback-like and harmless
        assert!(s.notes().is_empty());
        s.flow_down = vec![Rate(2_000_000)];
        let n = s.notes();
        assert_eq!(n.len(), 1);
        assert!(
            n[0].contains("--mtu 65535") && n[0].contains("1500"),
            "{n:?}"
        );
        s.mtu = 1500;
        assert!(s.notes().is_empty());
        s.mtu = 9000;
        s.flow_down.clear();
        s.server_egress = Some(Rate(1_000_000_000));
        assert_eq!(s.notes().len(), 1);
    }

    #[test]
    fn the_plan_builds_a_star_and_shapes_only_what_is_asked() {
        let mut s = LabSpec::new("p", 2);
        s.server_egress = Some(Rate(1_000_000_000));
        let plan = plan_up(&s).unwrap();
        let lines: Vec<String> = plan.iter().map(|c| c.join(" ")).collect();
        // every command names a lab namespace: nothing in the machine's own
        for l in &lines {
            assert!(l.contains(" vl-p-"), "{l}");
        }
        assert_eq!(lines[0], "ip netns add vl-p-hub");
        for (ns, port, addr) in [
            ("vl-p-srv", "s", "10.77.0.1"),
            ("vl-p-c0", "c0", "10.77.0.10"),
            ("vl-p-c1", "c1", "10.77.0.11"),
        ] {
            assert!(lines.contains(&format!("ip netns add {ns}")));
            assert!(lines.contains(&format!(
                "ip link add eth0 netns {ns} mtu 1500 type veth peer name {port} netns vl-p-hub mtu 1500"
            )));
            assert!(lines.contains(&format!("ip -n {ns} addr add {addr}/24 dev eth0")));
            assert!(lines.contains(&format!("ip -n vl-p-hub link set {port} master br0")));
        }
        let tc: Vec<&String> = lines.iter().filter(|l| l.starts_with("tc ")).collect();
        assert_eq!(tc.len(), 2, "{tc:?}");
        assert!(tc[1].ends_with("dev eth0 parent 1: classid 1:1 htb rate 1gbit ceil 1gbit"));
        assert!(tc[0].starts_with("tc -n vl-p-srv qdisc add dev eth0 root"));
        // namespaces exist before anything is put in them
        let pos = |p: &str| lines.iter().position(|l| l.starts_with(p)).unwrap();
        assert!(pos("ip netns add vl-p-c1") < pos("ip -n vl-p-c1"));
        s.client_down = Some(Rate(8_000_000));
        s.client_up = Some(Rate(1_000_000));
        let n = plan_up(&s).unwrap().iter().filter(|c| c[0] == "tc").count();
        assert_eq!(n, 2 + 2 * 2 * 2);
    }

    #[test]
    fn loss_drops_on_each_client_links_egress_both_ways() {
        let mut s = LabSpec::new("l", 2);
        s.client_down = Some(Rate(8_000_000));
        s.loss_down = Some(Loss(20_000));
        s.loss_up = Some(Loss(5_000));
        let lines: Vec<String> = plan_up(&s).unwrap().iter().map(|c| c.join(" ")).collect();
        for i in 0..2 {
            // toward the client: the hub's port; from it: its own eth0
            for (ns, dev, t) in [
                ("vl-l-hub", format!("c{i}"), 85_899_345),
                ("vl-l-c{i}", "eth0".into(), 21_474_836),
            ] {
                let ns = ns.replace("{i}", &i.to_string());
                assert!(
                    lines.contains(&format!("tc -n {ns} qdisc add dev {dev} clsact")),
                    "{ns} {dev}"
                );
                let f = format!("tc -n {ns} filter add dev {dev} egress prio 1 bpf da bytecode \"4,32 0 0 4294963256,53 1 0 {t},6 0 0 2,6 0 0 4294967295\"");
                assert!(lines.contains(&f), "{f}");
            }
        }
        // the senders send one packet per segment (a drop is one packet)
        for ns in ["vl-l-srv", "vl-l-c0", "vl-l-c1"] {
            let g = format!("ip -n {ns} link set eth0 gso_max_size 1500 gso_max_segs 1");
            assert_eq!(lines.iter().filter(|l| **l == g).count(), 1, "{g}");
        }
        // beside the rate's htb, not instead of it
        assert!(lines
            .iter()
            .any(|l| l.starts_with("tc -n vl-l-hub qdisc add dev c1 root")));
        // and every tc command goes through tc -batch, which unquotes the program
        let b = flow::batches(&plan_up(&s).unwrap());
        assert!(b.iter().all(|(c, _)| c[0] != "tc" || c[3] == "-batch"));
    }

    #[test]
    fn per_flow_shaping_goes_to_each_host_at_its_rate() {
        let mut s = LabSpec::new("f", 3);
        s.flow_down = vec![Rate(10_000_000), Rate(3_500_000), Rate(1_000_000)];
        let plan = plan_up(&s).unwrap();
        let lines: Vec<String> = plan.iter().map(|c| c.join(" ")).collect();
        for (i, r) in ["10mbit", "3500kbit", "1mbit"].iter().enumerate() {
            let leaf = format!(
                "tc -n vl-f-hub class add dev c{i} parent 1: classid 1:100 htb rate {r} ceil {r}"
            );
            assert!(lines.contains(&leaf), "{leaf}");
            assert!(lines.contains(&format!(
                "ip netns exec vl-f-c{i} sysctl -qw net.ipv4.ip_local_port_range=40960 41215"
            )));
        }
        // the server sends one segment per packet; nothing shapes upstream
        assert!(lines.contains(
            &"ip -n vl-f-srv link set eth0 gso_max_size 1500 gso_max_segs 1".to_string()
        ));
        assert!(!lines.iter().any(|l| l.contains("tc -n vl-f-c")));
        // batched: one tc process per run of one namespace's commands
        let b = flow::batches(&plan);
        assert!(b.len() < plan.len() / 10, "{} of {}", b.len(), plan.len());
        // one rate for all hosts; a list of the wrong length, or with
        // --client-down on the same link, is refused
        s.flow_down = vec![Rate(1_000_000)];
        assert_eq!(s.flow_down_of(2), Some(Rate(1_000_000)));
        s.flow_down = vec![Rate(1_000_000); 2];
        assert!(matches!(
            s.validate(),
            Err(LabError::Invalid {
                key: "flow_down",
                ..
            })
        ));
        s.flow_down = vec![Rate(1_000_000)];
        s.client_down = Some(Rate(1_000_000));
        assert!(s.validate().is_err());
        s.client_down = None;
        s.flow_up = vec![Rate(1_000_000)];
        let plan = plan_up(&s).unwrap();
        assert!(plan.iter().any(|c| c
            .join(" ")
            .starts_with("tc -n vl-f-c2 qdisc add dev eth0 root")));
    }
}
