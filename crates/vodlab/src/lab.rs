//! `vodlab lab`: a network lab on this machine (namespaces, veth, a bridge,
//! htb-shaped links; see `vodlab_lab::netlab` and docs/lab.md).

use std::process::{Child, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use vodlab_lab::netlab::{self, Lab, LabSpec, Rate, SERVER_ADDR};

/// The lab's shape, shared by `up` and `run`.
#[derive(Debug, Clone, Args)]
pub struct ShapeArgs {
    /// The lab's name (up to 8 letters, digits or '-'): its namespaces are
    /// vl-NAME-srv, vl-NAME-c0.., vl-NAME-hub.
    #[arg(long, default_value = "lab")]
    pub name: String,
    /// Client host namespaces (addresses 10.77.0.10, .11, ...; the server is 10.77.0.1).
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Shape the server's egress (the bottleneck toward all clients): a
    /// rate (docs/units.md), e.g. 1gbit, 100Mbit, 55MB/s (bytes/s).
    #[arg(long, value_name = "RATE")]
    pub server_egress: Option<Rate>,
    /// Shape each client host's downstream.
    #[arg(long, value_name = "RATE")]
    pub client_down: Option<Rate>,
    /// Shape each client host's upstream.
    #[arg(long, value_name = "RATE")]
    pub client_up: Option<Rate>,
    /// MTU of every link.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Shape each TCP connection to a client host on its own, at RATE (one
    /// rate for every host, or a comma-separated rate per host): one access
    /// link per viewer, as `vodlab run` emulates per session. The host's
    /// ephemeral ports become 40960-41215, so at most 256 connections at
    /// once per host. Clients see their rate in VODLAB_LAB_FLOW_DOWN.
    #[arg(
        long,
        value_name = "RATE[,RATE...]",
        value_delimiter = ',',
        conflicts_with = "client_down"
    )]
    pub flow_down: Vec<Rate>,
    /// Shape each TCP connection from a client host on its own, as
    /// --flow-down (requests are small: this matters for uploads).
    #[arg(
        long,
        value_name = "RATE[,RATE...]",
        value_delimiter = ',',
        conflicts_with = "client_up"
    )]
    pub flow_up: Vec<Rate>,
}

impl ShapeArgs {
    fn spec(&self) -> LabSpec {
        LabSpec {
            name: self.name.clone(),
            clients: self.clients,
            server_egress: self.server_egress,
            client_down: self.client_down,
            client_up: self.client_up,
            mtu: self.mtu,
            flow_down: self.flow_down.clone(),
            flow_up: self.flow_up.clone(),
        }
    }
}

/// `vodlab lab` subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build a lab and leave it up (remove it with `vodlab lab down`).
    ///
    /// Examples:
    ///   vodlab lab up --clients 4 --server-egress 1gbit
    ///   vodlab lab up --clients 4 --flow-down 10mbit,3.5mbit,1mbit,10mbit
    #[command(verbatim_doc_comment)]
    Up(ShapeArgs),
    /// Remove a lab's namespaces (and with them its links and qdiscs).
    Down {
        /// The lab's name.
        #[arg(long, default_value = "lab")]
        name: String,
    },
    /// Run a command in one of a lab's hosts: `server` or `client-I`.
    ///
    /// Example:
    ///   vodlab lab exec server -- vodlab serve --root /srv/v --listen 10.77.0.1:8080
    ///   vodlab lab exec client-0 -- curl -o /dev/null http://10.77.0.1:8080/a.mp4
    #[command(verbatim_doc_comment)]
    Exec {
        /// The lab's name.
        #[arg(long, default_value = "lab")]
        name: String,
        /// `server` or `client-I`.
        host: String,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Build a lab, start the server command in its server host, wait until
    /// it listens, run the client command in every client host at once,
    /// stop the server and remove the lab (also on Ctrl-C, SIGTERM or
    /// timeout). Commands run with `sh -c`; clients see VODLAB_LAB_SERVER
    /// (the server's address), VODLAB_LAB_CLIENT (their index) and, with
    /// --flow-down, VODLAB_LAB_FLOW_DOWN (their per-connection rate). Exit
    /// status: the first failing client's, else 0.
    ///
    /// Example:
    ///   vodlab lab run --server-egress 1gbit --port 8080 \
    ///     --server 'vodlab serve --root /srv/v --listen 10.77.0.1:8080' \
    ///     --client 'vodlab run work/w --target http://$VODLAB_LAB_SERVER:8080 -o out/c$VODLAB_LAB_CLIENT'
    #[command(verbatim_doc_comment)]
    Run(RunArgs),
}

/// `vodlab lab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    shape: ShapeArgs,
    /// The server command (sh -c), run in the server host.
    #[arg(long)]
    server: String,
    /// The client command (sh -c), run in each client host.
    #[arg(long)]
    client: String,
    /// The server's TCP port: clients start once it accepts connections.
    #[arg(long)]
    port: u16,
    /// Longest the whole run may take (a bare number is seconds: 3600, 1h;
    /// clients and server are then stopped and the lab removed).
    #[arg(long, default_value_t = 3600.0, value_name = "DURATION", value_parser = vodlab_units::parse_seconds)]
    timeout: f64,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub fn run(c: LabCommand) -> anyhow::Result<ExitCode> {
    match c {
        LabCommand::Up(s) => {
            let lab = Lab::up(s.spec())?;
            let spec = lab.detach();
            eprintln!(
                "vodlab lab: {} up: server {SERVER_ADDR} in {}, {} client host(s) {}..{} in {}..{}",
                spec.name,
                spec.server_ns(),
                spec.clients,
                spec.client_addr(0),
                spec.client_addr(spec.clients - 1),
                spec.client_ns(0),
                spec.client_ns(spec.clients - 1)
            );
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Down { name } => {
            let removed = netlab::remove(&name)?;
            if removed.is_empty() {
                eprintln!("vodlab lab: no lab named {name:?}");
            } else {
                eprintln!("vodlab lab: removed {}", removed.join(", "));
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Exec {
            name,
            host,
            command,
        } => {
            let ns = host_ns(&name, &host)?;
            let st = Lab::command_in(&ns, &command[0])
                .args(&command[1..])
                .status()
                .with_context(|| format!("running {:?} in {ns}", command[0]))?;
            Ok(ExitCode::from(st.code().unwrap_or(1).clamp(0, 255) as u8))
        }
        LabCommand::Run(a) => run_lab(a),
    }
}

/// The namespace of `server` or `client-I` in lab `name` (it must exist).
fn host_ns(name: &str, host: &str) -> anyhow::Result<String> {
    let spec = LabSpec::new(name, 1);
    let ns = match host {
        "server" => spec.server_ns(),
        h => match h
            .strip_prefix("client-")
            .and_then(|i| i.parse::<usize>().ok())
        {
            Some(i) => spec.client_ns(i),
            None => bail!("host {host:?}: give `server` or `client-I`"),
        },
    };
    if !netlab::existing_namespaces(name)?.contains(&ns) {
        bail!("lab {name:?} has no host {host} (namespace {ns}); `vodlab lab up` builds one");
    }
    Ok(ns)
}

/// Starts `sh -c cmd` in `ns`, in a process group of its own (so it can be
/// ended, with everything it started, by its PID alone).
fn spawn_in(ns: &str, cmd: &str, env: &[(&str, String)]) -> anyhow::Result<Child> {
    use std::os::unix::process::CommandExt;
    let mut c = Lab::command_in(ns, "sh");
    c.args(["-c", cmd]).stdin(Stdio::null()).process_group(0);
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn()
        .with_context(|| format!("starting `{cmd}` in {ns}"))
}

/// SIGTERM to the child's process group, SIGKILL after 5 s.
fn stop(child: &mut Child) {
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

fn run_lab(a: RunArgs) -> anyhow::Result<ExitCode> {
    let timeout = Duration::try_from_secs_f64(a.timeout)
        .ok()
        .filter(|t| !t.is_zero() && *t <= Duration::from_secs(7 * 86_400))
        .with_context(|| format!("--timeout {}: give 0 < seconds <= 604800", a.timeout))?;
    // SAFETY: the handler only stores to an atomic
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let lab = Lab::up(a.shape.spec())?;
    let spec = lab.spec().clone();
    let deadline = Instant::now() + timeout;
    let mut server = spawn_in(&spec.server_ns(), &a.server, &[])?;
    // wait until the server accepts, from the first client host
    let addr = std::net::SocketAddr::from((SERVER_ADDR, a.port));
    let ready_by = Instant::now() + Duration::from_secs(30).min(timeout);
    loop {
        let ok = netlab::in_namespace(&spec.client_ns(0), move || {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        })?;
        if ok {
            break;
        }
        if let Ok(Some(st)) = server.try_wait() {
            bail!("the server command ended before it listened on {addr}: {st}");
        }
        if Instant::now() > ready_by || STOP.load(Ordering::SeqCst) {
            stop(&mut server);
            bail!("the server did not listen on {addr} within 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "vodlab lab: server listening on {addr}; starting {} client(s)",
        spec.clients
    );
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
                        eprintln!("vodlab lab: client {i} ended with {st}");
                        first_failure.get_or_insert(st.code().unwrap_or(1));
                    }
                    *slot = None;
                }
            }
        }
        if STOP.load(Ordering::SeqCst) {
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
    eprintln!("vodlab lab: removed {}", removed.join(", "));
    if let Some(w) = why {
        bail!("{w}: clients and server stopped, lab removed");
    }
    Ok(ExitCode::from(
        first_failure.unwrap_or(0).clamp(0, 255) as u8
    ))
}
