//! The ground-truth server's HTTP/2 side (h2c with prior knowledge, the
//! `h2` crate): the same [`Behaviour`]s as over HTTP/1.1, each on its own
//! stream. What a behaviour that ends a response early means here:
//! `close_after` and `close_after_head` end the stream (END_STREAM) short
//! of its `content-length`; `reset_after` resets the stream
//! (RST_STREAM INTERNAL_ERROR); `stall_after` sends nothing more and keeps
//! the stream open until the client resets it. The body is sent as the
//! client's flow-control window allows, so `done_at` is when the last
//! byte was handed to the connection, not when it was buffered.

use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use http::{Request, Response};
use tokio::net::TcpStream;

use super::{plan, record, update, Body, Served, Site, Step};

fn io(e: h2::Error) -> std::io::Error {
    std::io::Error::other(e)
}

/// Serves one h2c connection: every stream in its own task.
pub(super) async fn serve(
    sock: TcpStream,
    conn: u64,
    site: Arc<Site>,
    log: Arc<Mutex<Vec<Served>>>,
) -> std::io::Result<()> {
    let mut h2 = h2::server::handshake(sock).await.map_err(io)?;
    while let Some(next) = h2.accept().await {
        let (req, respond) = next.map_err(io)?;
        let (site, log) = (site.clone(), log.clone());
        tokio::spawn(async move {
            let _ = answer(req, respond, conn, &site, &log).await;
        });
    }
    Ok(())
}

async fn answer(
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    conn: u64,
    site: &Site,
    log: &Mutex<Vec<Served>>,
) -> Result<(), h2::Error> {
    let arrived = Instant::now();
    let path = req.uri().path().to_string();
    let range = req
        .headers()
        .get("range")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let b = site.behaviour(&path);
    let size = site.size(&path);
    let (status, start, len) = plan(&b, size, range.as_deref());
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let cmcd = vodlab_cmcd::Cmcd::from_request(target, |n| {
        req.headers().get(n).and_then(|v| v.to_str().ok())
    });
    let i = record(
        log,
        Served {
            path: path.clone(),
            target: target.to_string(),
            range_start: start,
            conn,
            arrived,
            head_at: None,
            done_at: None,
            body_bytes: 0,
            status,
            cmcd,
        },
    );
    if !b.head_delay.is_zero() {
        tokio::time::sleep(b.head_delay).await;
    }
    let page = format!("status {status}\n");
    let ok = matches!(status, 200 | 206);
    let body_len = if ok { len } else { page.len() as u64 };
    let mut head = Response::builder()
        .status(status)
        .header("content-length", body_len);
    if status == 206 {
        head = head.header(
            "content-range",
            format!("bytes {start}-{}/{}", start + len - 1, size.unwrap_or(0)),
        );
    }
    for (n, v) in &b.headers {
        head = head.header(n.as_str(), v.as_str());
    }
    let head = head.body(()).expect("a valid response head");
    let mut stream = respond.send_response(head, body_len == 0)?;
    let now = Instant::now();
    update(log, i, |s| {
        s.head_at = Some(now);
        s.done_at = Some(now);
    });
    if b.close_after_head && body_len > 0 {
        stream.send_data(Bytes::new(), true)?;
        return Ok(());
    }
    if !ok {
        stream.send_data(Bytes::from(page.into_bytes()), true)?;
        update(log, i, |s| {
            s.done_at = Some(Instant::now());
            s.body_bytes = body_len;
        });
        return Ok(());
    }
    let mut body = Body::new(&b, len);
    loop {
        match body.next() {
            Step::Send { at, len: want } => {
                // wait for the client's window: the timing is the wire's
                stream.reserve_capacity(want as usize);
                let granted = match poll_fn(|cx| stream.poll_capacity(cx)).await {
                    Some(c) => c? as u64,
                    None => return Ok(()),
                };
                let n = want.min(granted.max(1));
                let mut d = vec![0u8; n as usize];
                site.fill(&path, start + at, &mut d);
                body.corrupt(at, &mut d);
                stream.send_data(Bytes::from(d), at + n == len)?;
                body.advance(n);
                let now = Instant::now();
                update(log, i, |s| {
                    s.done_at = Some(now);
                    s.body_bytes = at + n;
                });
            }
            Step::Wait(d) => tokio::time::sleep(d).await,
            // END_STREAM short of content-length (at the end it went
            // with the last bytes)
            Step::Close if !body.done() => {
                stream.send_data(Bytes::new(), true)?;
                return Ok(());
            }
            Step::Reset => {
                stream.send_reset(h2::Reason::INTERNAL_ERROR);
                return Ok(());
            }
            Step::Stall => {
                // hang until the client resets the stream or goes away
                let _ = poll_fn(|cx| stream.poll_reset(cx)).await;
                return Ok(());
            }
            Step::Close | Step::Done => return Ok(()),
        }
    }
}
