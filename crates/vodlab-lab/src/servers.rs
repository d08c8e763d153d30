//! The servers `vodlab compare` measures: `vodlab serve` in both I/O modes
//! and nginx, Apache (event MPM) and lighttpd from Debian, each with a
//! generated configuration tuned as the papers tuned them: sendfile, 60 s
//! keep-alive, unlimited (or effectively unlimited) requests per connection,
//! enough workers and connections, no access log. Each listens for the
//! comparison's protocol (h1, h2c by prior knowledge, https, h2 by ALPN),
//! TLS with the certificate of [`TlsFiles`]; a server that cannot speak it
//! here is skipped with the reason ([`ServerKind::unsupported`]). Rows of
//! the comparison ([`ServerSpec`]) may give `vodlab serve` a prefetch policy.

mod certs;
mod port;
mod rows;

pub use certs::TlsFiles;
pub use rows::ServerSpec;

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use thiserror::Error;
use vodlab_client::io::transport::Protocol;

use crate::hwbox::is_root;

/// A server that cannot be configured or started.
#[derive(Debug, Error)]
pub enum ServerError {
    /// An unknown server name.
    #[error(
        "unknown server `{0}` (known: vodlab-vanilla, vodlab-asap, nginx, apache2, lighttpd, nghttpx, ngtcp2)"
    )]
    Unknown(String),
    /// The program is not installed.
    #[error(
        "{program} not found; install the Debian package {package} (apt-get install {package})"
    )]
    Missing {
        /// The binary looked for.
        program: String,
        /// The package that has it.
        package: String,
    },
    /// Writing its configuration failed.
    #[error("{path}: {err}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        err: std::io::Error,
    },
    /// A row of `--servers` that does not parse.
    #[error("compare row `{row}`: {why}")]
    Row {
        /// The row as given.
        row: String,
        /// What is wrong with it.
        why: String,
    },
    /// Generating the run's TLS certificates failed.
    #[error("generating the TLS certificates: {0}")]
    Certificate(String),
    /// A TLS protocol without certificates.
    #[error("{server} over {protocol}: no certificate given (ServerSetup::tls)")]
    NoCertificate {
        /// The server.
        server: String,
        /// The protocol.
        protocol: String,
    },
    /// It exited or never listened.
    #[error("{server} did not start listening on {addr} within {secs} s{detail}")]
    NotListening {
        /// The server.
        server: String,
        /// Where it should listen.
        addr: SocketAddr,
        /// How long we waited.
        secs: u64,
        /// Its exit status or error log, if known.
        detail: String,
    },
    /// Another process listens where the server should: a readiness probe
    /// would reach that process, and the run would measure it.
    #[error(
        "{addr} is already taken by another process (another vodlab compare or bench, or a \
         service): {server} would not be the server measured; give a free port (--port)"
    )]
    PortTaken {
        /// The server we were to start.
        server: String,
        /// The address.
        addr: SocketAddr,
    },
}

/// The servers `vodlab compare` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerKind {
    /// `vodlab serve --io vanilla` (sendfile on a blocking pool).
    VodlabVanilla,
    /// `vodlab serve --io asap` (serialized aggressive prefetching).
    VodlabAsap,
    /// nginx (Debian nginx-light).
    Nginx,
    /// Apache httpd 2.4 with the event MPM (Debian apache2).
    Apache2,
    /// lighttpd (Debian lighttpd).
    Lighttpd,
    /// nghttpx (Debian nghttp2-proxy, the BBC's server) in front of
    /// `vodlab serve --io asap` over HTTP/1.1 on a second loopback port.
    Nghttpx,
    /// ngtcp2's example HTTP/3 server over GnuTLS (Debian ngtcp2-server,
    /// `gtlsserver`): HTTP/3 only, whole files only (it answers no
    /// `Range`), one thread.
    Ngtcp2,
}

impl ServerKind {
    /// Every server, in the order the comparison table lists them.
    pub const ALL: [Self; 7] = [
        Self::VodlabAsap,
        Self::VodlabVanilla,
        Self::Nginx,
        Self::Apache2,
        Self::Lighttpd,
        Self::Nghttpx,
        Self::Ngtcp2,
    ];

    /// The rows `vodlab compare` runs when `--servers` is not given: over
    /// the TCP protocols vodlab's two and the three Debian web servers;
    /// over h3 vodlab's two, ngtcp2, and the Debian servers that cannot
    /// (each row then says why, [`ServerKind::unsupported`]).
    pub fn defaults(p: Protocol) -> &'static [Self] {
        match p {
            Protocol::H3 => &[
                Self::VodlabAsap,
                Self::VodlabVanilla,
                Self::Ngtcp2,
                Self::Nginx,
                Self::Apache2,
                Self::Lighttpd,
                Self::Nghttpx,
            ],
            _ => &[
                Self::VodlabAsap,
                Self::VodlabVanilla,
                Self::Nginx,
                Self::Apache2,
                Self::Lighttpd,
            ],
        }
    }

    /// Its command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::VodlabVanilla => "vodlab-vanilla",
            Self::VodlabAsap => "vodlab-asap",
            Self::Nginx => "nginx",
            Self::Apache2 => "apache2",
            Self::Lighttpd => "lighttpd",
            Self::Nghttpx => "nghttpx",
            Self::Ngtcp2 => "ngtcp2",
        }
    }

    /// By command-line name.
    pub fn parse(s: &str) -> Result<Self, ServerError> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| ServerError::Unknown(s.to_string()))
    }

    /// `vodlab serve` (which has /vodlab/stats).
    pub fn is_vodlab(self) -> bool {
        matches!(self, Self::VodlabVanilla | Self::VodlabAsap)
    }

    /// Runs a `vodlab serve --io asap` (itself, or behind it as its
    /// backend): takes a prefetch policy and `--serve-arg`s.
    pub fn runs_asap(self) -> bool {
        matches!(self, Self::VodlabAsap | Self::Nghttpx)
    }

    /// A proxy in front of a backend ([`backend_command`]) on
    /// [`ServerSetup::backend`].
    pub fn needs_backend(self) -> bool {
        self == Self::Nghttpx
    }

    /// Serves whole files only (answers no `Range` request).
    pub fn whole_files_only(self) -> bool {
        self == Self::Ngtcp2
    }

    /// Listens on UDP only (no TCP port to wait for).
    pub fn udp_only(self) -> bool {
        self == Self::Ngtcp2
    }

    /// Why this server cannot be compared over `p` on this machine (`None`:
    /// it can). Checked before the server is started, so the row is
    /// skipped with the reason instead of failing.
    pub fn unsupported(self, p: Protocol) -> Option<String> {
        let missing = |what: &str, file: &str, package: &str| {
            (!Path::new(file).exists())
                .then(|| format!("{what} needs {file} (Debian {package}), not installed"))
        };
        match (self, p) {
            (Self::Ngtcp2, Protocol::H3) => {
                missing("ngtcp2 over h3", NGTCP2_SERVER, "ngtcp2-server")
            }
            (Self::Ngtcp2, p) => Some(format!(
                "ngtcp2's example server speaks only HTTP/3, not {p}"
            )),
            (Self::VodlabAsap | Self::VodlabVanilla, Protocol::H3) => None,
            (Self::Nginx, Protocol::H3) => Some(
                "Debian 12's nginx 1.22 has no HTTP/3 (its http_v3 module came with 1.25)".into(),
            ),
            (Self::Apache2, Protocol::H3) => Some("Apache httpd 2.4 has no HTTP/3".into()),
            (Self::Lighttpd, Protocol::H3) => Some("lighttpd 1.4 has no HTTP/3".into()),
            (Self::Nghttpx, Protocol::H3) => Some(
                "Debian 12's nghttpx 1.52 is built without QUIC (\"quic: QUIC is disabled \
                 at compile time\")"
                    .into(),
            ),
            (_, Protocol::H1)
            | (Self::VodlabAsap | Self::VodlabVanilla | Self::Nginx | Self::Nghttpx, _) => None,
            (Self::Apache2, Protocol::H2c) => missing("apache2 over h2c", APACHE_HTTP2, "apache2"),
            (Self::Apache2, Protocol::Https) => {
                missing("apache2 over https", APACHE_SSL, "apache2")
            }
            (Self::Apache2, _) => missing("apache2 over h2", APACHE_SSL, "apache2")
                .or_else(|| missing("apache2 over h2", APACHE_HTTP2, "apache2")),
            (Self::Lighttpd, Protocol::H2c) => None,
            (Self::Lighttpd, p) => Some(format!(
                "lighttpd over {p}: vodlab compare does not configure lighttpd's TLS \
                 (its module is the separate Debian package lighttpd-mod-openssl{})",
                if Path::new(LIGHTTPD_OPENSSL).exists() {
                    ""
                } else {
                    ", not installed here"
                }
            )),
        }
    }

    fn program(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Nginx => Some(("/usr/sbin/nginx", "nginx-light")),
            Self::Apache2 => Some(("/usr/sbin/apache2", "apache2")),
            Self::Lighttpd => Some(("/usr/sbin/lighttpd", "lighttpd")),
            Self::Nghttpx => Some(("/usr/sbin/nghttpx", "nghttp2-proxy")),
            Self::Ngtcp2 => Some((NGTCP2_SERVER, "ngtcp2-server")),
            _ => None,
        }
    }
}

const APACHE_HTTP2: &str = "/usr/lib/apache2/modules/mod_http2.so";
const APACHE_SSL: &str = "/usr/lib/apache2/modules/mod_ssl.so";
const LIGHTTPD_OPENSSL: &str = "/usr/lib/lighttpd/mod_openssl.so";
/// ngtcp2's example server over GnuTLS (Debian ngtcp2-server).
const NGTCP2_SERVER: &str = "/usr/sbin/gtlsserver";

/// Where and how to run a server.
#[derive(Debug, Clone)]
pub struct ServerSetup {
    /// Which server.
    pub kind: ServerKind,
    /// Directory served (the file set).
    pub root: PathBuf,
    /// Loopback address to listen on.
    pub addr: SocketAddr,
    /// Directory for its configuration, pid file and error log.
    pub workdir: PathBuf,
    /// The vodlab binary (for `vodlab serve`).
    pub vodlab: PathBuf,
    /// Worker processes (nginx) / server processes (Apache); defaults to the CPU count.
    pub workers: usize,
    /// Extra arguments for `vodlab serve` (e.g. `--prefetch 2M`).
    pub vodlab_args: Vec<String>,
    /// The protocol it listens for.
    pub protocol: Protocol,
    /// Its certificate and key (needed for https and h2).
    pub tls: Option<TlsFiles>,
    /// Where a proxy's backend listens (nghttpx's `vodlab serve`), a
    /// loopback port of its own.
    pub backend: Option<SocketAddr>,
}

/// Lets the servers' unprivileged workers (www-data) write their logs.
fn chown_to_www_data(dir: &Path) {
    let name = std::ffi::CString::new("www-data").expect("no NUL");
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).expect("no NUL");
    // SAFETY: getpwnam returns a pointer to static storage or NULL; read at once
    unsafe {
        let pw = libc::getpwnam(name.as_ptr());
        if !pw.is_null() {
            libc::chown(path.as_ptr(), (*pw).pw_uid, (*pw).pw_gid);
        }
    }
}

/// The configuration file text for a Debian server (`None` for vodlab).
pub fn config_text(s: &ServerSetup) -> Option<String> {
    let root = s.root.display();
    let wd = s.workdir.display();
    let (ip, port) = (s.addr.ip(), s.addr.port());
    let user = is_root();
    Some(match s.kind {
        ServerKind::Nginx => format!(
            "# generated by vodlab compare\n\
             daemon off;\nmaster_process on;\nworker_processes {w};\nworker_rlimit_nofile 65536;\n\
             {user}pid {wd}/nginx.pid;\nerror_log {wd}/error.log warn;\n\
             events {{\n  worker_connections 16384;\n  use epoll;\n  multi_accept on;\n}}\n\
             http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n  keepalive_timeout 60s;\n\
             \x20 keepalive_requests 1000000000;\n  types {{ video/mp4 mp4; video/iso.segment m4s; }}\n\
             \x20 default_type application/octet-stream;\n\
             \x20 client_body_temp_path {wd};\n  proxy_temp_path {wd};\n  fastcgi_temp_path {wd};\n\
             \x20 uwsgi_temp_path {wd};\n  scgi_temp_path {wd};\n\
             \x20 server {{\n    listen {addr}{listen};\n    root {root};\n{tls}  }}\n}}\n",
            w = s.workers,
            user = if user { "user www-data;\n" } else { "" },
            addr = s.addr,
            // nginx 1.22 (Debian 12): `listen ... http2` (`http2 on;` came
            // with 1.25.1); a plain listener with http2 is h2c by prior
            // knowledge only
            listen = match s.protocol {
                Protocol::H1 => "",
                Protocol::H2c => " http2",
                Protocol::Https => " ssl",
                // never configured: `unsupported` refuses h3 before
                Protocol::H2 | Protocol::H3 => " ssl http2",
            },
            tls = match (&s.tls, s.protocol.is_tls()) {
                (Some(t), true) => format!(
                    "    ssl_certificate {};\n    ssl_certificate_key {};\n",
                    t.cert.display(),
                    t.key.display()
                ),
                _ => String::new(),
            },
        ),
        ServerKind::Apache2 => format!(
            "# generated by vodlab compare\n\
             ServerRoot {wd}\nDefaultRuntimeDir {wd}\nPidFile {wd}/apache2.pid\nErrorLog {wd}/error.log\n\
             LogLevel warn\nServerName {ip}\nListen {addr}\n\
             LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so\n\
             LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so\n\
             LoadModule mime_module /usr/lib/apache2/modules/mod_mime.so\n\
             {user}\
             StartServers {w}\nServerLimit 16\nThreadsPerChild 64\nMaxRequestWorkers 1024\n\
             MinSpareThreads 64\nMaxSpareThreads 1024\nAsyncRequestWorkerFactor 4\n\
             MaxConnectionsPerChild 0\n\
             KeepAlive On\nMaxKeepAliveRequests 0\nKeepAliveTimeout 60\nTimeout 60\n\
             EnableSendfile On\nEnableMMAP Off\nTypesConfig /dev/null\n\
             AddType video/mp4 .mp4\nAddType video/iso.segment .m4s\n\
             DocumentRoot {root}\n<Directory {root}>\n  Require all granted\n  AllowOverride None\n</Directory>\n\
             {proto}",
            addr = s.addr,
            w = s.workers.max(1),
            user = if user { "User www-data\nGroup www-data\n" } else { "" },
            proto = apache_protocol(s),
        ),
        ServerKind::Lighttpd => format!(
            "# generated by vodlab compare\n\
             server.document-root = \"{root}\"\nserver.bind = \"{ip}\"\nserver.port = {port}\n\
             server.pid-file = \"{wd}/lighttpd.pid\"\nserver.errorlog = \"{wd}/error.log\"\n\
             {user}\
             server.event-handler = \"linux-sysepoll\"\nserver.network-backend = \"sendfile\"\n\
             server.max-fds = 65536\nserver.max-connections = 16384\n\
             server.max-keep-alive-requests = 1000000000\nserver.max-keep-alive-idle = 60\n\
             server.max-read-idle = 60\nserver.max-write-idle = 360\n\
             mimetype.assign = (\".mp4\" => \"video/mp4\", \".m4s\" => \"video/iso.segment\")\n\
             {proto}",
            proto = match s.protocol {
                // HTTP/2 is in lighttpd's core (1.4.56+); h2c by prior
                // knowledge with server.h2c
                Protocol::H2c => {
                    "server.feature-flags = (\"server.h2proto\" => \"enable\", \"server.h2c\" => \"enable\")\n"
                }
                _ => "",
            },
            ip = match ip {
                std::net::IpAddr::V6(v) => format!("[{v}]"),
                v4 => v4.to_string(),
            },
            user = if user {
                "server.username = \"www-data\"\nserver.groupname = \"www-data\"\n"
            } else {
                ""
            },
        ),
        ServerKind::VodlabVanilla
        | ServerKind::VodlabAsap
        | ServerKind::Nghttpx
        | ServerKind::Ngtcp2 => return None,
    })
}

/// Apache's lines for the protocol: mod_http2 for h2c and h2, mod_ssl with
/// the certificate for https and h2.
fn apache_protocol(s: &ServerSetup) -> String {
    let mut t = String::new();
    if matches!(s.protocol, Protocol::H2c | Protocol::H2) {
        t += &format!("LoadModule http2_module {APACHE_HTTP2}\n");
    }
    if let (true, Some(f)) = (s.protocol.is_tls(), &s.tls) {
        let wd = s.workdir.display();
        t += &format!(
            "LoadModule ssl_module {APACHE_SSL}\n\
             LoadModule socache_shmcb_module /usr/lib/apache2/modules/mod_socache_shmcb.so\n\
             SSLSessionCache shmcb:{wd}/ssl_scache(512000)\nSSLEngine on\n\
             SSLCertificateFile {}\nSSLCertificateKeyFile {}\n",
            f.cert.display(),
            f.key.display()
        );
    }
    t += match s.protocol {
        Protocol::H1 | Protocol::Https => "Protocols http/1.1\n",
        // h2c by prior knowledge (H2Direct, on for cleartext by default)
        Protocol::H2c => "Protocols h2c http/1.1\nH2Direct on\n",
        // h3: refused by `unsupported` before any configuration
        Protocol::H2 | Protocol::H3 => "Protocols h2 http/1.1\n",
    };
    t
}

/// The command that runs the server in the foreground (configuration
/// written to the work directory first).
pub fn command(s: &ServerSetup) -> Result<Command, ServerError> {
    std::fs::create_dir_all(&s.workdir).map_err(|e| ServerError::Io {
        path: s.workdir.clone(),
        err: e,
    })?;
    // absolute: nginx resolves -c against -p, apache against ServerRoot
    let abs = std::fs::canonicalize(&s.workdir).map_err(|e| ServerError::Io {
        path: s.workdir.clone(),
        err: e,
    })?;
    let s = &ServerSetup {
        workdir: abs,
        ..s.clone()
    };
    if s.protocol.is_tls() && s.tls.is_none() {
        return Err(ServerError::NoCertificate {
            server: s.kind.name().into(),
            protocol: s.protocol.to_string(),
        });
    }
    if is_root() && !s.kind.is_vodlab() {
        chown_to_www_data(&s.workdir);
    }
    let conf_path = |name: &str| s.workdir.join(name);
    let write = |p: &Path, text: &str| {
        std::fs::write(p, text).map_err(|e| ServerError::Io {
            path: p.to_path_buf(),
            err: e,
        })
    };
    let mut cmd = match s.kind {
        ServerKind::VodlabVanilla | ServerKind::VodlabAsap => {
            let mut c = Command::new(&s.vodlab);
            c.arg("serve")
                .arg("--root")
                .arg(&s.root)
                .arg("--listen")
                .arg(s.addr.to_string())
                .arg("--io")
                .arg(if s.kind == ServerKind::VodlabAsap {
                    "asap"
                } else {
                    "vanilla"
                })
                .arg("--stats-interval")
                .arg("0");
            // one port serves h1 and h2c by prior knowledge; with a
            // certificate also TLS (ALPN h2 and http/1.1)
            if let (true, Some(t)) = (s.protocol.is_tls(), &s.tls) {
                c.arg("--tls-cert")
                    .arg(&t.cert)
                    .arg("--tls-key")
                    .arg(&t.key);
            }
            // h3: QUIC on the same port number over UDP, beside the TCP
            // listener (which /vodlab/stats is read from)
            if s.protocol == Protocol::H3 {
                c.arg("--h3");
            }
            c.args(&s.vodlab_args);
            c
        }
        kind => {
            let (program, package) = kind.program().expect("Debian servers have a program");
            if !Path::new(program).exists() {
                return Err(ServerError::Missing {
                    program: program.into(),
                    package: package.into(),
                });
            }
            let mut c = Command::new(program);
            if kind == ServerKind::Nghttpx {
                nghttpx_args(s, &mut c)?;
                c
            } else if kind == ServerKind::Ngtcp2 {
                ngtcp2_args(s, &mut c);
                c
            } else {
                let text = config_text(s).expect("Debian servers have a configuration");
                match kind {
                    ServerKind::Nginx => {
                        let p = conf_path("nginx.conf");
                        write(&p, &text)?;
                        c.arg("-p").arg(&s.workdir).arg("-c").arg(p);
                    }
                    ServerKind::Apache2 => {
                        let p = conf_path("apache2.conf");
                        write(&p, &text)?;
                        c.arg("-f").arg(p).arg("-DFOREGROUND");
                    }
                    _ => {
                        let p = conf_path("lighttpd.conf");
                        write(&p, &text)?;
                        c.arg("-D").arg("-f").arg(p);
                    }
                }
                c
            }
        }
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(s.workdir.join("stderr.log")).map_err(|e| ServerError::Io {
                path: s.workdir.join("stderr.log"),
                err: e,
            })?,
        ));
    Ok(cmd)
}

/// nghttpx's arguments (no configuration file): one frontend on the
/// setup's address (cleartext for h1 and h2c — it takes both — or TLS with
/// ALPN h2 and http/1.1), the backend over HTTP/1.1 with enough
/// connections that the proxy does not queue sessions (its default is 8
/// per worker), 60 s keep-alive as the other servers.
fn nghttpx_args(s: &ServerSetup, c: &mut Command) -> Result<(), ServerError> {
    let b = s.backend.ok_or_else(|| ServerError::NotListening {
        server: "nghttpx".into(),
        addr: s.addr,
        secs: 0,
        detail: " (no backend address: ServerSetup::backend)".into(),
    })?;
    let wd = s.workdir.display();
    let tls = s.protocol.is_tls();
    c.arg("--conf=/dev/null")
        .arg(format!(
            "--frontend={},{}{}",
            s.addr.ip(),
            s.addr.port(),
            if tls { "" } else { ";no-tls" }
        ))
        .arg(format!("--backend={},{}", b.ip(), b.port()))
        .arg(format!("--workers={}", s.workers.max(1)))
        .arg("--backend-connections-per-host=4096")
        .arg("--frontend-keep-alive-timeout=60s")
        .arg("--no-ocsp")
        .arg(format!("--pid-file={wd}/nghttpx.pid"))
        .arg(format!("--errorlog-file={wd}/error.log"))
        .arg("--accesslog-file=/dev/null");
    if tls {
        let t = s.tls.as_ref().expect("checked: TLS has files");
        c.arg(&t.key).arg(&t.cert);
    }
    Ok(())
}

/// ngtcp2's example server's arguments (no configuration file): quiet
/// (its default prints every frame), the file set as its document root,
/// idle connections closed after 60 s as the other servers' keep-alive,
/// the setup's address, then key and certificate.
fn ngtcp2_args(s: &ServerSetup, c: &mut Command) {
    let t = s.tls.as_ref().expect("checked: TLS has files");
    c.arg("-q")
        .arg("-d")
        .arg(&s.root)
        .arg("--timeout=60s")
        .arg(s.addr.ip().to_string())
        .arg(s.addr.port().to_string())
        .arg(&t.key)
        .arg(&t.cert);
}

/// The backend of a proxy row (`None` for the others): `vodlab serve --io
/// asap` on [`ServerSetup::backend`] over HTTP/1.1, with the row's
/// `vodlab serve` arguments; its output goes to `backend.log`.
pub fn backend_command(s: &ServerSetup) -> Result<Option<Command>, ServerError> {
    if !s.kind.needs_backend() {
        return Ok(None);
    }
    let b = s.backend.ok_or_else(|| ServerError::NotListening {
        server: format!("{} backend", s.kind.name()),
        addr: s.addr,
        secs: 0,
        detail: " (no backend address: ServerSetup::backend)".into(),
    })?;
    std::fs::create_dir_all(&s.workdir).map_err(|e| ServerError::Io {
        path: s.workdir.clone(),
        err: e,
    })?;
    let log = s.workdir.join("backend.log");
    let mut c = Command::new(&s.vodlab);
    c.arg("serve")
        .arg("--root")
        .arg(&s.root)
        .arg("--listen")
        .arg(b.to_string())
        .arg("--io")
        .arg("asap")
        .arg("--stats-interval")
        .arg("0")
        .args(&s.vodlab_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).map_err(|e| {
            ServerError::Io {
                path: log.clone(),
                err: e,
            }
        })?));
    Ok(Some(c))
}

/// The setup of a proxy's backend (for [`wait_listening`]).
pub fn backend_setup(s: &ServerSetup) -> Option<ServerSetup> {
    s.backend.map(|b| ServerSetup {
        kind: ServerKind::VodlabAsap,
        addr: b,
        protocol: Protocol::H1,
        ..s.clone()
    })
}

/// Waits until the server listens on `addr` (accepts TCP connections;
/// over h3 also has its UDP port bound, and a UDP-only server only that),
/// or the child exits, or `timeout` passes.
pub fn wait_listening(
    s: &ServerSetup,
    child: &mut Child,
    timeout: Duration,
) -> Result<(), ServerError> {
    let deadline = Instant::now() + timeout;
    loop {
        let tcp = s.kind.udp_only()
            || TcpStream::connect_timeout(&s.addr, Duration::from_millis(200)).is_ok();
        let udp = s.protocol != Protocol::H3 || udp_bound(s.addr);
        if tcp && !s.kind.udp_only() && port::stranger_listens(s.addr, child.id()) == Some(true) {
            return Err(ServerError::PortTaken {
                server: s.kind.name().into(),
                addr: s.addr,
            });
        }
        if tcp && udp {
            return Ok(());
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() > deadline {
            let log = ["error.log", "stderr.log"]
                .iter()
                .filter_map(|f| std::fs::read_to_string(s.workdir.join(f)).ok())
                .collect::<String>();
            let tail: String = log.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
            return Err(ServerError::NotListening {
                server: s.kind.name().into(),
                addr: s.addr,
                secs: timeout.as_secs(),
                detail: match exited {
                    Some(st) => format!(" (it exited: {st}; log: {tail})"),
                    None => format!(" (log: {tail})"),
                },
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An error if another process already listens where `s` should (TCP, or
/// UDP for h3): checked before the server starts, so that its own bind
/// failure is not hidden behind a readiness probe that the other process
/// answers.
pub fn ensure_port_free(s: &ServerSetup) -> Result<(), ServerError> {
    let taken = || ServerError::PortTaken {
        server: s.kind.name().into(),
        addr: s.addr,
    };
    if !s.kind.udp_only() && port::tcp_listeners(s.addr).is_some_and(|l| !l.is_empty()) {
        return Err(taken());
    }
    if s.protocol == Protocol::H3 && udp_bound(s.addr) {
        return Err(taken());
    }
    Ok(())
}

/// Whether a socket is bound to UDP `addr` (`/proc/net/udp`, or `udp6`
/// for IPv6), without sending it anything: a QUIC server answers no probe
/// a client could send before its handshake.
pub fn udp_bound(addr: SocketAddr) -> bool {
    let (file, local) = match addr {
        SocketAddr::V4(a) => (
            "/proc/net/udp",
            format!("{:08X}:{:04X}", u32::from(*a.ip()).swap_bytes(), a.port()),
        ),
        SocketAddr::V6(a) => (
            "/proc/net/udp6",
            format!("{}:{:04X}", port::proc_net_v6(a.ip()), a.port()),
        ),
    };
    let unspecified_v4 = format!("00000000:{:04X}", addr.port());
    std::fs::read_to_string(file).is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a == local || (addr.is_ipv4() && a == unspecified_v4))
        })
    })
}

/// Stops a server we started: SIGTERM, then SIGKILL after `grace`.
pub fn stop(child: &mut Child, grace: Duration) {
    if child.try_wait().ok().flatten().is_some() {
        return;
    }
    // SAFETY: signalling our own child by PID
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests;
