//! One stream's state inside a trunk connection: what it still has to
//! announce, its send and receive buffers and credits, and how far each
//! direction has ended.

use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::blast_request::BlastRequest;

use super::event::StreamStats;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SendEnd {
    Open,
    FinQueued,
    FinSent,
}

#[derive(Debug)]
pub(super) struct Stream {
    pub(super) local: bool,
    pub(super) accepted: bool,
    // pending control for this stream
    pub(super) in_ctrl: bool,
    pub(super) open_pending: Option<(SocketAddr, SocketAddr, Option<BlastRequest>)>,
    pub(super) open_ok_pending: bool,
    pub(super) window_pending: u64,
    // send side
    pub(super) send_buf: VecDeque<u8>,
    pub(super) send_credit: u64,
    pub(super) send_end: SendEnd,
    pub(super) in_send: bool,
    pub(super) write_blocked: bool,
    // receive side
    pub(super) recv_buf: VecDeque<u8>,
    pub(super) recv_credit: u64,
    pub(super) recv_extra: u64,
    pub(super) recv_fin: bool,
    pub(super) fin_read: bool,
    pub(super) readable_notified: bool,
    pub(super) stats: StreamStats,
}

impl Stream {
    pub(super) fn new(local: bool, send_credit: u64, recv_credit: u64) -> Stream {
        Stream {
            local,
            accepted: false,
            in_ctrl: false,
            open_pending: None,
            open_ok_pending: false,
            window_pending: 0,
            send_buf: VecDeque::new(),
            send_credit,
            send_end: SendEnd::Open,
            in_send: false,
            write_blocked: false,
            recv_buf: VecDeque::new(),
            recv_credit,
            recv_extra: 0,
            recv_fin: false,
            fin_read: false,
            readable_notified: false,
            stats: StreamStats::default(),
        }
    }

    pub(super) fn may_send_data(&self) -> bool {
        self.open_pending.is_none() && !self.open_ok_pending && (self.local || self.accepted)
    }

    pub(super) fn sendable(&self) -> bool {
        self.may_send_data()
            && ((!self.send_buf.is_empty() && self.send_credit > 0)
                || (self.send_buf.is_empty() && self.send_end == SendEnd::FinQueued))
    }

    pub(super) fn committed(&self) -> u64 {
        self.recv_credit + self.window_pending + self.recv_buf.len() as u64
    }
}
