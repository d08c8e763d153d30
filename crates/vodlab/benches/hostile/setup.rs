//! Where the server, the benign client and the attacker run.
//!
//! - **shared**: all three on loopback in the machine's own network
//!   namespace, unpinned, the attack a runtime inside the bench's process
//!   (the set-up of the first runs in docs/benchmarks.md);
//! - **separated**: three hosts of a network lab (`vodlab_lab::netlab`,
//!   unshaped veth links with a 1,500-byte MTU through a bridge): the server
//!   on `server`, the benign client on `client-0`, the attacker in a
//!   process of its own on `client-1`, in a cgroup whose CPU quota
//!   (`cpu.max`, or v1's `cpu.cfs_quota_us`) caps it, and each of the three
//!   pinned to CPUs of its own where the machine has enough of them
//!   ([`Cpus::split`]). The packets' kernel work is then charged where the
//!   sender runs, so the attacker's own traffic costs the attacker's CPUs.

use std::fs;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;

use vodlab_lab::netlab::{in_namespace, Lab, LabSpec, SERVER_ADDR};

/// The lab's name (its namespaces are `vl-hostile-*`).
const LAB: &str = "hostile";

/// Which CPUs each party may use (`taskset -c`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cpus {
    /// The server's CPUs (it runs one worker thread per CPU).
    pub server: Vec<usize>,
    /// The benign client's.
    pub benign: Vec<usize>,
    /// The attacker's.
    pub attacker: Vec<usize>,
}

impl Cpus {
    /// Splits `n` CPUs: with 6 or more, a quarter (at least 2) each to the
    /// server and the benign client and the rest to the attacker, no CPU
    /// shared; with 2-5, the server gets CPU 0 alone and the benign client
    /// and the attacker share the others (the attacker's quota keeps its
    /// share); with 1, everything shares it.
    pub fn split(n: usize) -> Self {
        let all: Vec<usize> = (0..n.max(1)).collect();
        if n >= 6 {
            let q = (n / 4).max(2);
            Self {
                server: all[..q].to_vec(),
                benign: all[q..2 * q].to_vec(),
                attacker: all[2 * q..].to_vec(),
            }
        } else if n >= 2 {
            Self {
                server: vec![0],
                benign: all[1..].to_vec(),
                attacker: all[1..].to_vec(),
            }
        } else {
            Self {
                server: all.clone(),
                benign: all.clone(),
                attacker: all,
            }
        }
    }
}

/// A `taskset -c` list: `0-3`, or `1,3`.
pub fn cpu_list(v: &[usize]) -> String {
    let contiguous = v.windows(2).all(|w| w[1] == w[0] + 1);
    match (v.first(), v.last()) {
        (Some(a), Some(b)) if contiguous && a != b => format!("{a}-{b}"),
        _ => v
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// A cgroup with a CPU quota, removed when dropped.
pub struct CpuQuota {
    dir: PathBuf,
    v2: bool,
    /// The quota, in cores.
    pub cores: f64,
}

impl CpuQuota {
    /// Creates `name` with a quota of `cores` CPUs per 100 ms period: under
    /// cgroup v1's `cpu` controller where it is mounted, else under v2's
    /// root (enabling `+cpu` in its `cgroup.subtree_control`).
    pub fn create(name: &str, cores: f64) -> io::Result<Self> {
        let period = 100_000u64;
        let quota = ((cores * period as f64) as u64).max(1_000);
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let (dir, v2) = if v1.join("cpu.cfs_quota_us").exists() {
            (v1.join(name), false)
        } else {
            let root = Path::new("/sys/fs/cgroup");
            let ctl = fs::read_to_string(root.join("cgroup.controllers"))?;
            if !ctl.split_whitespace().any(|c| c == "cpu") {
                return Err(io::Error::other(
                    "neither cgroup v1's cpu controller nor v2's cpu controller is available",
                ));
            }
            let _ = fs::write(root.join("cgroup.subtree_control"), "+cpu");
            (root.join(name), true)
        };
        if dir.exists() {
            let _ = fs::remove_dir(&dir); // a leftover of a killed run (empty)
        }
        fs::create_dir(&dir)?;
        let q = Self { dir, v2, cores };
        if v2 {
            fs::write(q.dir.join("cpu.max"), format!("{quota} {period}"))?;
        } else {
            fs::write(q.dir.join("cpu.cfs_period_us"), period.to_string())?;
            fs::write(q.dir.join("cpu.cfs_quota_us"), quota.to_string())?;
        }
        Ok(q)
    }

    /// Moves process `pid` (all its threads) into the cgroup.
    pub fn add(&self, pid: u32) -> io::Result<()> {
        fs::write(self.dir.join("cgroup.procs"), pid.to_string())
    }

    /// Periods in which the quota stopped the cgroup, and for how long in
    /// all (s): whether the quota was what limited the attacker.
    pub fn throttled(&self) -> (u64, f64) {
        let s = fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
        let get = |k: &str| {
            s.lines()
                .find_map(|l| l.strip_prefix(k)?.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let secs = if self.v2 {
            get("throttled_usec ") as f64 / 1e6
        } else {
            get("throttled_time ") as f64 / 1e9
        };
        (get("nr_throttled "), secs)
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        // the attacker has ended by now; its exit may take a moment to
        // leave the cgroup
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("could not remove cgroup {}", self.dir.display());
    }
}

/// The separated set-up's parts.
pub struct Separated {
    lab: Lab,
    /// The attacker's CPU quota.
    pub quota: CpuQuota,
    /// The CPUs of each party.
    pub cpus: Cpus,
}

/// Where the parties run.
pub enum Setup {
    /// All on loopback, unpinned, the attack in the bench's process.
    Shared,
    /// Three lab hosts, pinned, the attacker's CPU capped.
    Separated(Box<Separated>),
}

impl Setup {
    /// Builds the lab, the attacker's cgroup and the CPU split (root only).
    pub fn separated(cores: usize, attacker_cores: f64) -> Result<Self, String> {
        let lab = Lab::up(LabSpec::new(LAB, 2)).map_err(|e| format!("network lab: {e}"))?;
        let quota = CpuQuota::create(
            &format!("vodlab-hostile-{}", std::process::id()),
            attacker_cores,
        )
        .map_err(|e| format!("the attacker's CPU cgroup: {e}"))?;
        Ok(Self::Separated(Box::new(Separated {
            lab,
            quota,
            cpus: Cpus::split(cores),
        })))
    }

    /// `shared` or `separated`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::Separated(_) => "separated",
        }
    }

    /// The server's listening address for `port`.
    pub fn server_addr(&self, port: u16) -> SocketAddr {
        let ip = match self {
            Self::Shared => Ipv4Addr::LOCALHOST,
            Self::Separated(_) => SERVER_ADDR,
        };
        SocketAddr::new(IpAddr::V4(ip), port)
    }

    /// The server's worker threads (`--threads`), where the set-up fixes them.
    pub fn server_threads(&self) -> Option<usize> {
        match self {
            Self::Shared => None,
            Self::Separated(s) => Some(s.cpus.server.len()),
        }
    }

    /// The benign client's threads (`h2load -t`): one per CPU it has in
    /// the separated set-up (at most its 16 connections), else one.
    pub fn benign_threads(&self) -> usize {
        match self {
            Self::Shared => 1,
            Self::Separated(s) => s.cpus.benign.len().clamp(1, crate::BENIGN_CONNS),
        }
    }

    fn wrap(ns: &str, cpus: &[usize], program: &Path) -> Command {
        // `ip netns exec` and `taskset` both exec, so the child's PID is
        // the program's
        let mut c = Lab::command_in(ns, "taskset");
        c.args(["-c", &cpu_list(cpus)]).arg(program);
        c
    }

    /// The command that starts `vodlab serve`.
    pub fn serve_command(&self, vodlab: &Path) -> Command {
        match self {
            Self::Shared => Command::new(vodlab),
            Self::Separated(s) => Self::wrap(&s.lab.spec().server_ns(), &s.cpus.server, vodlab),
        }
    }

    /// The command that starts the benign client (`h2load`).
    pub fn benign_command(&self, h2load: &Path) -> Command {
        match self {
            Self::Shared => Command::new(h2load),
            Self::Separated(s) => Self::wrap(&s.lab.spec().client_ns(0), &s.cpus.benign, h2load),
        }
    }

    /// The command that starts the attacker process (this executable), or
    /// `None` where the attack runs inside the bench's process.
    pub fn attacker_command(&self) -> Option<Command> {
        match self {
            Self::Shared => None,
            Self::Separated(s) => {
                let me = std::env::current_exe().expect("the bench's executable");
                Some(Self::wrap(
                    &s.lab.spec().client_ns(1),
                    &s.cpus.attacker,
                    &me,
                ))
            }
        }
    }

    /// Puts the attacker process under its CPU quota.
    pub fn attacker_started(&self, pid: u32) {
        if let Self::Separated(s) = self {
            s.quota
                .add(pid)
                .expect("moving the attacker into its cgroup");
        }
    }

    /// Runs `f` where the benign client runs (its network namespace), e.g.
    /// to reach the server's statistics.
    pub fn on_client_host<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        match self {
            Self::Shared => f(),
            Self::Separated(s) => in_namespace(&s.lab.spec().client_ns(0), f)
                .expect("entering the client's namespace"),
        }
    }

    /// One line saying where each party runs.
    pub fn describe(&self) -> String {
        match self {
            Self::Shared => "set-up shared: server, benign client and attacker on loopback in one \
                             network namespace, unpinned; the attack in the bench's process"
                .into(),
            Self::Separated(s) => {
                format!(
                "set-up separated: lab {LAB:?} (veth, MTU {}), server {SERVER_ADDR} on CPUs {}, \
                 benign client {} on CPUs {}, attacker process {} on CPUs {} capped at {:.2} cores \
                 (cgroup {})",
                s.lab.spec().mtu,
                cpu_list(&s.cpus.server),
                s.lab.spec().client_addr(0),
                cpu_list(&s.cpus.benign),
                s.lab.spec().client_addr(1),
                cpu_list(&s.cpus.attacker),
                s.quota.cores,
                if s.quota.v2 { "v2 cpu.max" } else { "v1 cpu.cfs_quota_us" },
            )
            }
        }
    }
}
