//! The lab's flags ([`ShapeArgs`]) and `vodlab lab run` ([`run_lab`]): a lab
//! built, a server command started in its server host, client commands in
//! every client host at once, everything stopped and the lab removed at
//! the end (also when told to stop, or at the timeout).

use std::net::SocketAddr;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use thiserror::Error;

use super::{existing_namespaces, in_namespace, Lab, LabError, LabSpec, Loss, Rate, SERVER_ADDR};

/// The lab's shape, shared by `up` and `run`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct ShapeArgs {
    /// The lab's name (up to 8 letters, digits or '-'): its namespaces are
    /// vl-NAME-srv, vl-NAME-c0.., vl-NAME-hub.
    #[cfg_attr(feature = "cli", arg(long, default_value = "lab"))]
    pub name: String,
    /// Client host namespaces (addresses 10.77.0.10, .11, ...; the server is 10.77.0.1).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1))]
    pub clients: usize,
    /// Shape the server's egress (the bottleneck toward all clients): a
    /// rate (docs/units.md), e.g. 1gbit, 100Mbit, 55MB/s (bytes/s).
    #[cfg_attr(feature = "cli", arg(long, value_name = "RATE"))]
    pub server_egress: Option<Rate>,
    /// Shape each client host's downstream.
    #[cfg_attr(feature = "cli", arg(long, value_name = "RATE"))]
    pub client_down: Option<Rate>,
    /// Shape each client host's upstream.
    #[cfg_attr(feature = "cli", arg(long, value_name = "RATE"))]
    pub client_up: Option<Rate>,
    /// MTU of every link.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1500))]
    pub mtu: u32,
    /// Shape each TCP connection to a client host on its own, at RATE (one
    /// rate for every host, or a comma-separated rate per host): one access
    /// link per viewer, as `vodlab run` emulates per session. The host's
    /// ephemeral ports become 40960-41215, so at most 256 connections at
    /// once per host (more with --flows-per-host). Clients see their rate
    /// in VODLAB_LAB_FLOW_DOWN.
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            value_name = "RATE[,RATE...]",
            value_delimiter = ',',
            conflicts_with = "client_down"
        )
    )]
    pub flow_down: Vec<Rate>,
    /// Shape each TCP connection from a client host on its own, as
    /// --flow-down (requests are small: this matters for uploads).
    #[cfg_attr(
        feature = "cli",
        arg(
            long,
            value_name = "RATE[,RATE...]",
            value_delimiter = ',',
            conflicts_with = "client_up"
        )
    )]
    pub flow_up: Vec<Rate>,
    /// Connections a client host may have shaped at once under --flow-down
    /// or --flow-up: a multiple of 256 up to 16384 (its ephemeral ports are
    /// 40960 to 40960 + N - 1; above 256, a second hash level picks a
    /// port's class).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N", default_value_t = super::flow::FLOWS))]
    pub flows_per_host: u16,
    /// Drop PCT % of the packets toward each client host at random (TCP
    /// and UDP alike: a fair loss for h1/h2 against h3), e.g. 2 or 0.5%
    /// (above 0, at most 50). A classic-BPF program on the link's egress
    /// (this kernel has no netem); `tc -n vl-NAME-hub -s qdisc show dev
    /// cI` counts what it dropped.
    #[cfg_attr(feature = "cli", arg(long, value_name = "PCT"))]
    pub loss_down: Option<Loss>,
    /// Drop PCT % of the packets from each client host at random, as
    /// --loss-down (counted on the client host's eth0).
    #[cfg_attr(feature = "cli", arg(long, value_name = "PCT"))]
    pub loss_up: Option<Loss>,
}

impl ShapeArgs {
    /// The lab these flags describe.
    pub fn spec(&self) -> LabSpec {
        LabSpec {
            name: self.name.clone(),
            clients: self.clients,
            server_egress: self.server_egress,
            client_down: self.client_down,
            client_up: self.client_up,
            mtu: self.mtu,
            flow_down: self.flow_down.clone(),
            flow_up: self.flow_up.clone(),
            flows_per_host: self.flows_per_host,
            loss_down: self.loss_down,
            loss_up: self.loss_up,
        }
    }
}

/// `vodlab lab run`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct RunArgs {
    /// The lab's shape.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub shape: ShapeArgs,
    /// The server command (sh -c), run in the server host.
    #[cfg_attr(feature = "cli", arg(long))]
    pub server: String,
    /// The client command (sh -c), run in each client host.
    #[cfg_attr(feature = "cli", arg(long))]
    pub client: String,
    /// The server's TCP port: clients start once it accepts connections.
    #[cfg_attr(feature = "cli", arg(long))]
    pub port: u16,
    /// Longest the whole run may take (a bare number is seconds: 3600, 1h;
    /// clients and server are then stopped and the lab removed).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 3600.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds))]
    pub timeout: f64,
}

/// Why `vodlab lab run` (or finding a host) failed.
#[derive(Debug, Error)]
pub enum LabRunError {
    /// The lab could not be built, entered or removed.
    #[error(transparent)]
    Lab(#[from] LabError),
    /// A setting out of range, a host that is not there, a server that
    /// did not listen, a run stopped (the message says which).
    #[error("{0}")]
    Invalid(String),
    /// A command could not be started; `what` says which.
    #[error("{what}")]
    Start {
        /// The command and the host.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A namespace could not be entered.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Hears how a run goes, and tells it to stop.
pub trait LabRunObserver {
    /// True once the run is to stop (Ctrl-C, SIGTERM): clients and server
    /// are stopped and the lab removed.
    fn stop_requested(&mut self) -> bool {
        false
    }
    /// The server listens on `addr`; `clients` clients start.
    fn listening(&mut self, _addr: SocketAddr, _clients: usize) {}
    /// Client `i` ended with a failure.
    fn client_failed(&mut self, _i: usize, _status: ExitStatus) {}
    /// The lab's namespaces are removed.
    fn removed(&mut self, _namespaces: &[String]) {}
}

/// An observer that hears nothing and never stops a run.
impl LabRunObserver for () {}

/// The namespace of `server` or `client-I` in lab `name` (it must exist).
pub fn host_ns(name: &str, host: &str) -> Result<String, LabRunError> {
    let spec = LabSpec::new(name, 1);
    let ns = match host {
        "server" => spec.server_ns(),
        h => match h
            .strip_prefix("client-")
            .and_then(|i| i.parse::<usize>().ok())
        {
            Some(i) => spec.client_ns(i),
            None => {
                return Err(LabRunError::Invalid(format!(
                    "host {host:?}: give `server` or `client-I`"
                )))
            }
        },
    };
    if !existing_namespaces(name)?.contains(&ns) {
        return Err(LabRunError::Invalid(format!(
            "lab {name:?} has no host {host} (namespace {ns}); `vodlab lab up` builds one"
        )));
    }
    Ok(ns)
}

/// Starts `sh -c cmd` in `ns`, in a process group of its own (so it can be
/// ended, with everything it started, by its PID alone).
pub fn spawn_in(ns: &str, cmd: &str, env: &[(&str, String)]) -> Result<Child, LabRunError> {
    use std::os::unix::process::CommandExt;
    let mut c = Lab::command_in(ns, "sh");
    c.args(["-c", cmd]).stdin(Stdio::null()).process_group(0);
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().map_err(|source| LabRunError::Start {
        what: format!("starting `{cmd}` in {ns}"),
        source,
    })
}

/// SIGTERM to the child's process group, SIGKILL after 5 s.
pub fn stop(child: &mut Child) {
    let pg = child.id() as i32;
    // SAFETY: signalling a process group we created
    unsafe { libc::kill(-pg, libc::SIGTERM) };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: as above
    unsafe { libc::kill(-pg, libc::SIGKILL) };
    let _ = child.wait();
}

/// Runs `vodlab lab run` (see the module note); returns the exit status
/// of the first client that failed, else 0.
pub fn run_lab(a: &RunArgs, obs: &mut impl LabRunObserver) -> Result<i32, LabRunError> {
    let timeout = Duration::try_from_secs_f64(a.timeout)
        .ok()
        .filter(|t| !t.is_zero() && *t <= Duration::from_secs(7 * 86_400))
        .ok_or_else(|| {
            LabRunError::Invalid(format!(
                "--timeout {}: give 0 < seconds <= 604800",
                a.timeout
            ))
        })?;
    let lab = Lab::up(a.shape.spec())?;
    let spec = lab.spec().clone();
    let deadline = Instant::now() + timeout;
    let mut server = spawn_in(&spec.server_ns(), &a.server, &[])?;
    // wait until the server accepts, from the first client host
    let addr = SocketAddr::from((SERVER_ADDR, a.port));
    let ready_by = Instant::now() + Duration::from_secs(30).min(timeout);
    loop {
        let ok = in_namespace(&spec.client_ns(0), move || {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        })?;
        if ok {
            break;
        }
        if let Ok(Some(st)) = server.try_wait() {
            return Err(LabRunError::Invalid(format!(
                "the server command ended before it listened on {addr}: {st}"
            )));
        }
        if Instant::now() > ready_by || obs.stop_requested() {
            stop(&mut server);
            return Err(LabRunError::Invalid(format!(
                "the server did not listen on {addr} within 30 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    obs.listening(addr, spec.clients);
    let mut clients = Vec::new();
    for i in 0..spec.clients {
        let mut env = vec![
            ("VODLAB_LAB_SERVER", SERVER_ADDR.to_string()),
            ("VODLAB_LAB_CLIENT", i.to_string()),
        ];
        if let Some(r) = spec.flow_down_of(i) {
            env.push(("VODLAB_LAB_FLOW_DOWN", r.to_string()));
        }
        clients.push(Some(spawn_in(&spec.client_ns(i), &a.client, &env)?));
    }
    let mut first_failure: Option<i32> = None;
    let mut why = None;
    while clients.iter().any(Option::is_some) {
        for (i, slot) in clients.iter_mut().enumerate() {
            if let Some(ch) = slot {
                if let Ok(Some(st)) = ch.try_wait() {
                    if !st.success() {
                        obs.client_failed(i, st);
                        first_failure.get_or_insert(st.code().unwrap_or(1));
                    }
                    *slot = None;
                }
            }
        }
        if obs.stop_requested() {
            why = Some("interrupted");
        } else if Instant::now() > deadline {
            why = Some("timeout");
        }
        if why.is_some() {
            for ch in clients.iter_mut().flatten() {
                stop(ch);
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop(&mut server);
    let removed = lab.down()?;
    obs.removed(&removed);
    if let Some(w) = why {
        return Err(LabRunError::Invalid(format!(
            "{w}: clients and server stopped, lab removed"
        )));
    }
    Ok(first_failure.unwrap_or(0))
}
