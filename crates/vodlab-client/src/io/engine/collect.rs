//! The aggregator side of the executor: one task owns the run's
//! [`RunMetrics`] and the requests CSV, fed by the sessions' batched
//! reports.

use std::io::Write;
use std::sync::Arc;

use tokio::sync::mpsc;
use vodlab_workload::script::Session;

use super::checkpoint::Checkpointer;
use super::{Ctx, Report};
use crate::out::metrics::{RequestSample, RunMetrics};

/// Owns the run's metrics and the requests CSV; ends when every sender has gone.
pub(super) async fn aggregate(
    mut rx: mpsc::UnboundedReceiver<Report>,
    ctx: Arc<Ctx>,
    limits: Vec<usize>,
    mut csv: Option<std::io::BufWriter<std::fs::File>>,
    late_us: u64,
    mut checkpoint: Option<Checkpointer>,
) -> (RunMetrics, Option<std::io::Error>) {
    let mut m = RunMetrics::new(late_us);
    let mut csv_err = None;
    let mut line = String::new();
    loop {
        let due = checkpoint.as_ref().map(Checkpointer::due);
        let r = tokio::select! {
            r = rx.recv() => match r {
                Some(r) => r,
                None => break,
            },
            _ = async {
                match due {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some(c) = checkpoint.as_mut() {
                    c.write(&ctx, &m, std::time::Instant::now());
                }
                continue;
            }
        };
        match r {
            Report::Start { t_s, lateness_us } => m.record_start(t_s, lateness_us),
            Report::Requests {
                shard,
                index,
                samples,
                delivery,
            } => {
                let (shard, index) = (shard as usize, index as usize);
                let session = &ctx.work.shards[shard].sessions[index];
                let class = session.header.class.as_deref().unwrap_or("default");
                let measured = ctx.work.is_measured(index, limits[shard]);
                m.record_delivery(measured, &delivery);
                for s in &samples {
                    m.record_request(class, measured, s);
                }
                if let Some(f) = csv.as_mut() {
                    let id = session_id(session, shard, index);
                    // the rows name each request's path and range: the
                    // whole session (a streamed one is read again)
                    let whole = match ctx.work.session(shard, index) {
                        Ok(w) => w,
                        Err(e) => {
                            csv_err.get_or_insert(std::io::Error::other(e.to_string()));
                            continue;
                        }
                    };
                    for s in &samples {
                        line.clear();
                        csv_row(&mut line, id, shard, class, &whole, measured, s);
                        if let Err(e) = f.write_all(line.as_bytes()) {
                            csv_err.get_or_insert(e);
                        }
                    }
                }
            }
            Report::Session {
                shard,
                index,
                sample,
            } => {
                let (shard, index) = (shard as usize, index as usize);
                let session = &ctx.work.shards[shard].sessions[index];
                let class = session.header.class.as_deref().unwrap_or("default");
                let measured = ctx.work.is_measured(index, limits[shard]);
                m.record_session(class, measured, &sample);
            }
            Report::Opened(o) => m.transport.record(&o),
            Report::Quic(f) => m.transport.quic.record(&f),
            Report::QuicLink(c) => m.transport.quic_link.record(&c),
        }
    }
    if let Some(f) = csv.as_mut() {
        if let Err(e) = f.flush() {
            csv_err.get_or_insert(e);
        }
    }
    if let Some(c) = checkpoint.as_mut() {
        c.finish().await;
    }
    (m, csv_err)
}

pub(super) fn session_id(session: &Session, shard: usize, index: usize) -> u64 {
    session
        .header
        .id
        .unwrap_or(((shard as u64) << 40) | index as u64)
}

fn csv_row(
    out: &mut String,
    id: u64,
    shard: usize,
    class: &str,
    session: &Session,
    measured: bool,
    s: &RequestSample,
) {
    use std::fmt::Write as _;
    let j = s.request as usize;
    let r = &session.requests[j];
    let range = r
        .range
        .map(|g| g.header_value().trim_start_matches("bytes=").to_string())
        .unwrap_or_default();
    let _ = match s.outcome {
        Ok(d) => {
            let _ = write!(
                out,
                "{id},{shard},{class},{j},{},{range},{},{:.6},{:.6},{:.3},{:.3},{},{},",
                r.path,
                u8::from(measured),
                s.scheduled_s,
                s.sent_s,
                d.ttfb_us as f64 / 1e3,
                d.response_us as f64 / 1e3,
                d.bytes,
                d.status
            );
            if let crate::core::delivery::Playback::After(t) = d.playback {
                let _ = write!(out, "{:.3}", t.as_secs_f64() * 1e3);
            }
            // error last and empty, as before the playback columns
            writeln!(out, ",{:.3},", d.response_us as f64 / 1e3)
        }
        Err(k) => writeln!(
            out,
            "{id},{shard},{class},{j},{},{range},{},{:.6},,,,,,,,{}",
            r.path,
            u8::from(measured),
            s.scheduled_s,
            k.name()
        ),
    };
}
