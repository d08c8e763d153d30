//! `vodlab lab`: a network lab on this machine (namespaces, veth, a bridge,
//! htb-shaped links, random loss; the library builds and runs it: [`vodlab_lab::netlab`];
//! docs/lab.md).

use std::net::SocketAddr;
use std::process::{ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use clap::Subcommand;
use vodlab_lab::netlab::{self, host_ns, Lab, LabRunObserver, RunArgs, ShapeArgs, SERVER_ADDR};

/// `vodlab lab` subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build a lab and leave it up (remove it with `vodlab lab down`).
    ///
    /// Examples:
    ///   vodlab lab up --clients 4 --server-egress 1gbit
    ///   vodlab lab up --clients 4 --flow-down 10mbit,3.5mbit,1mbit,10mbit
    ///   vodlab lab up --clients 1 --client-down 10mbit --loss-down 2 --loss-up 2
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

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// A run's progress on stderr; stops on SIGINT or SIGTERM.
struct Stderr;

impl LabRunObserver for Stderr {
    fn stop_requested(&mut self) -> bool {
        STOP.load(Ordering::SeqCst)
    }
    fn listening(&mut self, addr: SocketAddr, clients: usize) {
        eprintln!("vodlab lab: server listening on {addr}; starting {clients} client(s)");
    }
    fn client_failed(&mut self, i: usize, st: ExitStatus) {
        eprintln!("vodlab lab: client {i} ended with {st}");
    }
    fn removed(&mut self, namespaces: &[String]) {
        eprintln!("vodlab lab: removed {}", namespaces.join(", "));
    }
}

/// Prints the lab's notes ([`netlab::LabSpec::notes`]) before it is built.
fn note_spec(spec: &netlab::LabSpec) {
    for n in spec.notes() {
        eprintln!("vodlab lab: note: {n}");
    }
}

/// Runs `vodlab lab`.
pub fn run(c: LabCommand) -> anyhow::Result<ExitCode> {
    match c {
        LabCommand::Up(s) => {
            note_spec(&s.spec());
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
        LabCommand::Run(a) => {
            // SAFETY: the handler only stores to an atomic
            unsafe {
                libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
                libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
            }
            note_spec(&a.shape.spec());
            let code = netlab::run_lab(&a, &mut Stderr)?;
            Ok(ExitCode::from(code.clamp(0, 255) as u8))
        }
    }
}
