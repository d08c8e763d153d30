//! An HTTP/3 response's head and body on its request stream: the three
//! ways a file body goes out, as for HTTP/2 ([`crate::h2`]):
//!
//! - **paced** (`--pace`, user mode): the stream is a session of the
//!   server's pacer ([`crate::pacing::register_stream`]); each grant's
//!   bytes are read and offered to the QUIC stream when the driver hands
//!   the grant over, so vodlab's pacer decides what quinn may send and
//!   when. quinn then puts those bytes into packets within its congestion
//!   window, spaced by its own packet pacer: the lower of the two rates
//!   wins (vodlab's on an uncongested link, QUIC's when the congestion
//!   window is the limit), and a stream short of flow-control credit falls
//!   behind its grants, never ahead.
//! - **ASAP** (`--io asap`, unpaced): the range executor ([`crate::asap`]:
//!   probe, prefetch controller, the connection's session taken in turn by
//!   its streams) with the stream as its sink ([`crate::conn_io::Sink::H3`]).
//! - **vanilla**: read on the blocking pool, a body chunk at a time.
//!
//! Every write waits at most the send timeout (no progress: a reader that
//! stopped reading, its stream stopped and counted).

use std::io;

use bytes::Bytes;
use vodlab_http::server::Head;
use vodlab_prefetch::SessionState;

use crate::access::CacheOutcome;
use crate::asap::{FileCtx, RangeIo};
use crate::bitrate::ResponseRate;
use crate::config::IoMode;
use crate::conn_io::H3Stream as Stream;
use crate::conn_io::{h3_send as send, h3_send_file as send_file, h3_timed as timed, Sink};
use crate::plan::to_response;
use crate::plan::{Body, ResponsePlan};
use crate::request::chain_of;
use crate::state::State;

/// What a stream's body sender needs besides the stream.
pub(super) struct StreamCtx<'a> {
    pub(super) st: &'a State,
    /// The connection's number.
    pub(super) conn: u64,
    /// The QUIC connection (its closing is the client going away).
    pub(super) quic: &'a quinn::Connection,
    /// The connection's prefetch session, taken in turn by its streams.
    pub(super) session: &'a tokio::sync::Mutex<SessionState>,
    pub(super) head: &'a Head,
    /// The response's file, with the request's bit rate.
    pub(super) file: Option<FileCtx<'a>>,
    /// The rate a paced file body is sent at (user-mode pacing).
    pub(super) pace: Option<ResponseRate>,
}

/// Sends the plan's head and body, then finishes the stream; file bytes
/// sent count in `sent`, the probe's outcome in `cache`.
pub(super) async fn respond(
    sc: &StreamCtx<'_>,
    out: &mut Stream,
    p: &ResponsePlan,
    sent: &mut u64,
    cache: &mut CacheOutcome,
) -> io::Result<()> {
    let limit = sc.st.cfg.send_timeout;
    timed(limit, out.send_response(to_response(p))).await?;
    match &p.body {
        Body::None => {}
        Body::Bytes(b) => send(sc.st, out, Bytes::from(b.clone()), None).await?,
        Body::File(r) if sc.pace.is_some() => {
            let (Some(f), Some(rate)) = (&sc.file, &sc.pace) else {
                return Err(io::Error::other("a paced body without a file or rate"));
            };
            Sink::H3(out, sent, sc.quic)
                .send_paced(sc.st, f.file, rate, r.offset, r.len)
                .await?
        }
        Body::File(r) => *cache = send_file_part(sc, out, r.offset, r.len, sent).await?,
        Body::Multipart { parts, closing } => {
            for part in parts {
                send(sc.st, out, Bytes::from(part.head.clone()), None).await?;
                let r = part.range;
                *cache = send_file_part(sc, out, r.offset, r.len, sent).await?;
                send(sc.st, out, Bytes::from_static(b"\r\n"), None).await?;
            }
            send(sc.st, out, Bytes::from(closing.clone()), None).await?;
        }
    }
    timed(limit, out.finish()).await
}

/// Sends one range of the response's file: through the ASAP executor (the
/// connection's session, taken in turn by its streams) or, in vanilla
/// mode, read on the blocking pool.
async fn send_file_part(
    sc: &StreamCtx<'_>,
    out: &mut Stream,
    off: u64,
    len: u64,
    sent: &mut u64,
) -> io::Result<CacheOutcome> {
    let Some(info) = &sc.file else {
        return Err(io::Error::other("a file body without a file"));
    };
    if sc.st.cfg.io != IoMode::Asap {
        send_file(sc.st, out, info.file, off, len, sent, true).await?;
        return Ok(CacheOutcome::None);
    }
    let mut session = sc.session.lock().await;
    let mut io = RangeIo {
        sink: Sink::H3(out, sent, sc.quic),
        st: sc.st,
        session: &mut session,
        conn: sc.conn,
    };
    let (cache, res) = io
        .send_range(info, off, len, chain_of(&sc.head.target))
        .await;
    res.map(|()| cache)
}
