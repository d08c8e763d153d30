//! Counters of TLS and HTTP/2 (handshakes, streams, the abuse limits that
//! fired), of HTTP/3, and their statistics view (`tls`, `h2` and `h3` in
//! `/vodlab/stats`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

/// Lock-free counters of the TLS and HTTP/2 layers.
#[derive(Debug, Default)]
pub struct ProtoCounters {
    /// TLS handshakes completed.
    pub tls_handshakes: AtomicU64,
    /// TLS handshakes that failed (bad ClientHello, no common cipher...).
    pub tls_failures: AtomicU64,
    /// TLS connections that negotiated `h2` by ALPN.
    pub alpn_h2: AtomicU64,
    /// TLS connections on HTTP/1.1 (ALPN `http/1.1`, or no ALPN).
    pub alpn_http11: AtomicU64,
    /// Writes cut to a small record by dynamic record sizing.
    pub small_record_writes: Arc<AtomicU64>,
    /// HTTP/2 connections over TLS.
    pub h2_connections: AtomicU64,
    /// HTTP/2 connections by prior knowledge on the plain port (h2c).
    pub h2c_connections: AtomicU64,
    /// HTTP/2 streams (requests) accepted.
    pub h2_streams: AtomicU64,
    /// Streams the client reset while the server answered them.
    pub h2_client_resets: AtomicU64,
    /// Streams reset by the server because their response made no progress
    /// for the send timeout (slow readers).
    pub h2_send_timeouts: AtomicU64,
    /// Connections closed for rapid reset (CVE-2023-44487): the h2 crate's
    /// pending-accept reset limit, or the RST_STREAM rate limit.
    pub rapid_reset: AtomicU64,
    /// Connections closed because the client made the server reset too
    /// many streams for protocol errors (`max_local_error_reset_streams`).
    pub local_error_resets: AtomicU64,
    /// Connections closed for a CONTINUATION flood or an oversized header
    /// list (the h2 crate's limits).
    pub continuation_flood: AtomicU64,
    /// Connections closed for a SETTINGS flood.
    pub settings_flood: AtomicU64,
    /// Connections closed for a PING flood.
    pub ping_flood: AtomicU64,
    /// Connections closed for a WINDOW_UPDATE flood.
    pub window_update_flood: AtomicU64,
    /// Connections closed for a flood of small or empty DATA frames (the
    /// h2 crate's data-frame budget or the rate limit).
    pub small_data_flood: AtomicU64,
    /// Connections closed for another protocol error the server detected.
    pub h2_protocol_errors: AtomicU64,
    /// HTTP/2 connections closed after the idle timeout.
    pub h2_idle_closed: AtomicU64,
    /// Bans given to addresses for abuse (`crate::penalty`).
    pub abuse_bans: AtomicU64,
    /// Connections closed at accept: their address was banned.
    pub refused_banned: AtomicU64,
    /// Connections closed at accept: their address was on probation and
    /// over its rate.
    pub refused_throttled: AtomicU64,
    /// Addresses remembered by the penalty now.
    pub penalty_addresses: AtomicU64,
    /// Banned addresses the listener's SYN filter drops now
    /// (`crate::synfilter`).
    pub syn_filter_addresses: AtomicU64,
    /// Times the SYN filter was rebuilt (a ban began or ended).
    pub syn_filter_updates: AtomicU64,
    /// Connections reset at accept for their address's connection rate
    /// (`--conn-rate-per-address`; each also reported as abuse).
    pub conn_rate_exceeded: AtomicU64,
    /// HTTP/3 (QUIC) connections established.
    pub h3_connections: AtomicU64,
    /// HTTP/3 connections open now (handshaking ones included).
    pub h3_open: AtomicU64,
    /// QUIC handshakes in progress now (accepted, not yet established
    /// nor failed): what decides a Retry under load (`--h3-retry-above`).
    pub h3_handshaking: AtomicU64,
    /// QUIC connection attempts refused at the connection cap
    /// (`--h3-max-connections`).
    pub h3_refused: AtomicU64,
    /// QUIC handshakes that failed.
    pub h3_handshake_failures: AtomicU64,
    /// Retry packets sent to validate a client's address (`--h3-retry`).
    pub h3_retries: AtomicU64,
    /// HTTP/3 request streams the client opened (accepted by the server).
    pub h3_streams: AtomicU64,
    /// HTTP/3 request streams open now (at most the stream credit per
    /// connection).
    pub h3_open_streams: AtomicU64,
    /// HTTP/3 request streams that ended without a complete request head:
    /// reset, closed or malformed by the client (a head not in within the
    /// header timeout is a `header_timeouts` instead).
    pub h3_stream_errors: AtomicU64,
    /// HTTP/3 connections closed for having no request stream open for
    /// the keep-alive timeout (`--keepalive`).
    pub h3_idle_closed: AtomicU64,
    /// HTTP/3 requests (request streams) answered.
    pub h3_requests: AtomicU64,
    /// Body bytes sent on HTTP/3 streams.
    pub h3_bytes: AtomicU64,
    /// HTTP/3 responses cut short (the client reset the stream or left).
    pub h3_aborted: AtomicU64,
    /// QUIC's own figures of the server's side, summed over the HTTP/3
    /// connections that ended (quinn's `Connection::stats()` when each
    /// closed): packets sent.
    pub h3_packets_sent: AtomicU64,
    /// Of those, declared lost by the server's loss detection.
    pub h3_packets_lost: AtomicU64,
    /// Bytes of the packets declared lost.
    pub h3_lost_bytes: AtomicU64,
    /// Congestion events of the server's congestion controller.
    pub h3_congestion_events: AtomicU64,
    /// UDP datagrams sent.
    pub h3_datagrams_sent: AtomicU64,
    /// Bytes of those datagrams.
    pub h3_udp_bytes_sent: AtomicU64,
}

/// TLS statistics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TlsStats {
    /// Handshakes completed.
    pub handshakes: u64,
    /// Handshakes failed.
    pub failures: u64,
    /// Connections on h2 by ALPN.
    pub alpn_h2: u64,
    /// Connections on HTTP/1.1.
    pub alpn_http11: u64,
    /// Writes cut to small records (dynamic record sizing).
    pub small_record_writes: u64,
}

/// HTTP/2 statistics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct H2Stats {
    /// Connections over TLS.
    pub connections: u64,
    /// h2c connections (prior knowledge).
    pub h2c_connections: u64,
    /// Streams accepted.
    pub streams: u64,
    /// Streams the client reset mid-response.
    pub client_resets: u64,
    /// Streams reset for the send timeout.
    pub send_timeouts: u64,
    /// Connections closed for rapid reset.
    pub rapid_reset: u64,
    /// Connections closed for too many protocol-error resets.
    pub local_error_resets: u64,
    /// Connections closed for a CONTINUATION flood.
    pub continuation_flood: u64,
    /// Connections closed for a SETTINGS flood.
    pub settings_flood: u64,
    /// Connections closed for a PING flood.
    pub ping_flood: u64,
    /// Connections closed for a WINDOW_UPDATE flood.
    pub window_update_flood: u64,
    /// Connections closed for a small-DATA flood.
    pub small_data_flood: u64,
    /// Connections closed for other protocol errors.
    pub protocol_errors: u64,
    /// Connections closed idle.
    pub idle_closed: u64,
    /// Bans given to addresses for abuse.
    pub abuse_bans: u64,
    /// Connections closed at accept from a banned address.
    pub refused_banned: u64,
    /// Connections closed at accept from an address on probation over its rate.
    pub refused_throttled: u64,
    /// Addresses the penalty remembers now.
    pub penalty_addresses: u64,
    /// Banned addresses whose packets the listener's SYN filter drops now
    /// (their attempts never become connections, so they are not in
    /// `refused_banned`).
    pub syn_filter_addresses: u64,
    /// Times the SYN filter was rebuilt.
    pub syn_filter_updates: u64,
    /// Connections reset at accept for their address's connection rate.
    pub conn_rate_exceeded: u64,
}

/// HTTP/3 statistics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct H3Stats {
    /// QUIC connections established.
    pub connections: u64,
    /// Connections open now.
    pub open_connections: u64,
    /// Handshakes in progress now.
    pub handshaking: u64,
    /// Connection attempts refused at the connection cap.
    pub refused: u64,
    /// Handshakes that failed.
    pub handshake_failures: u64,
    /// Retry packets sent (address validation).
    pub retries: u64,
    /// Request streams opened by clients.
    pub streams: u64,
    /// Request streams open now.
    pub open_streams: u64,
    /// Request streams that ended before a complete head.
    pub stream_errors: u64,
    /// Connections closed idle (no request for `--keepalive`).
    pub idle_closed: u64,
    /// Requests answered.
    pub requests: u64,
    /// Body bytes sent.
    pub bytes: u64,
    /// Responses cut short.
    pub aborted: u64,
    /// QUIC packets the server sent, over the connections that ended.
    pub packets_sent: u64,
    /// Of those, declared lost by the server.
    pub packets_lost: u64,
    /// Bytes of the packets declared lost.
    pub lost_bytes: u64,
    /// Congestion events of the server's congestion controller.
    pub congestion_events: u64,
    /// UDP datagrams the server sent, over the connections that ended.
    pub datagrams_sent: u64,
    /// Bytes of those datagrams.
    pub udp_bytes_sent: u64,
}

impl ProtoCounters {
    /// The HTTP/3 statistics now.
    pub fn h3_view(&self) -> H3Stats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        H3Stats {
            connections: g(&self.h3_connections),
            open_connections: g(&self.h3_open),
            handshaking: g(&self.h3_handshaking),
            refused: g(&self.h3_refused),
            handshake_failures: g(&self.h3_handshake_failures),
            retries: g(&self.h3_retries),
            streams: g(&self.h3_streams),
            open_streams: g(&self.h3_open_streams),
            stream_errors: g(&self.h3_stream_errors),
            idle_closed: g(&self.h3_idle_closed),
            requests: g(&self.h3_requests),
            bytes: g(&self.h3_bytes),
            aborted: g(&self.h3_aborted),
            packets_sent: g(&self.h3_packets_sent),
            packets_lost: g(&self.h3_packets_lost),
            lost_bytes: g(&self.h3_lost_bytes),
            congestion_events: g(&self.h3_congestion_events),
            datagrams_sent: g(&self.h3_datagrams_sent),
            udp_bytes_sent: g(&self.h3_udp_bytes_sent),
        }
    }

    /// The statistics now.
    pub fn view(&self) -> (TlsStats, H2Stats) {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (
            TlsStats {
                handshakes: g(&self.tls_handshakes),
                failures: g(&self.tls_failures),
                alpn_h2: g(&self.alpn_h2),
                alpn_http11: g(&self.alpn_http11),
                small_record_writes: g(&self.small_record_writes),
            },
            H2Stats {
                connections: g(&self.h2_connections),
                h2c_connections: g(&self.h2c_connections),
                streams: g(&self.h2_streams),
                client_resets: g(&self.h2_client_resets),
                send_timeouts: g(&self.h2_send_timeouts),
                rapid_reset: g(&self.rapid_reset),
                local_error_resets: g(&self.local_error_resets),
                continuation_flood: g(&self.continuation_flood),
                settings_flood: g(&self.settings_flood),
                ping_flood: g(&self.ping_flood),
                window_update_flood: g(&self.window_update_flood),
                small_data_flood: g(&self.small_data_flood),
                protocol_errors: g(&self.h2_protocol_errors),
                idle_closed: g(&self.h2_idle_closed),
                abuse_bans: g(&self.abuse_bans),
                refused_banned: g(&self.refused_banned),
                refused_throttled: g(&self.refused_throttled),
                penalty_addresses: g(&self.penalty_addresses),
                syn_filter_addresses: g(&self.syn_filter_addresses),
                syn_filter_updates: g(&self.syn_filter_updates),
                conn_rate_exceeded: g(&self.conn_rate_exceeded),
            },
        )
    }
}
