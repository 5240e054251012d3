//! The RBUDP data path (docs/rbudp.md): bulk stream data to a peer with
//! `transport = "rbudp"` goes as blasts over UDP; the trunk stays the
//! control channel and carries everything else.
//!
//! * One UDP socket per relay (`outside.udp_listen`); a receive task hands
//!   each datagram to the trunk whose session id it carries.
//! * One [`RbudpSession`](wanproto::rbudp::RbudpSession) per authenticated
//!   trunk to an rbudp peer, in [`TrunkInner::rbudp`](super::trunk::TrunkInner::rbudp)
//!   (under the trunk's lock), and one *blaster* task per such trunk that
//!   sends its paced datagrams and runs its timer.
//! * **Which bytes go by UDP.** A stream task that reads a full 64 KiB from
//!   its socket (bulk is coming) keeps reading, waiting at most
//!   [`GATHER_WAIT`](super::blast::GATHER_WAIT) for each further read, up to `blast` bytes. If it
//!   gathered at least `bulk_threshold` bytes they become one blast,
//!   announced on the trunk with the stream's count of trunk bytes before
//!   it; anything smaller goes over the trunk at once. Small messages thus
//!   keep the trunk's latency (one pass through each relay), and only bulk
//!   pays a blast's (its transmission at the rate plus one round trip).
//! * **Order.** The announcement is a trunk frame queued before the stream
//!   bytes written after it (wanproto guarantees it), so the receiving
//!   relay knows where each blast goes before it can read past that point:
//!   it reads the stream's trunk bytes up to the blast's offset, waits for
//!   the blast to complete, writes it, releases it, and reads on.
//! * **Window.** A stream whose blast does not fit the peer's window waits
//!   for its own earlier blasts to be released; a stream with none in
//!   flight sends over the trunk instead, so a stalled destination holding
//!   the window never stalls another stream.
//! * **Which streams** ([`policy::stream_policy`]): with `rbudp_streams = "all"`
//!   every stream to the peer, with `"requested"` only those whose ranks
//!   sent a blast request (kind-3 preamble, carried in the OPEN so both
//!   relays know it). A request sets the stream's blast rate and datagram
//!   size, clamped to the peer's `rate` (per trunk) and `payload`.
//! * **Upgrading an open connection** ([`super::TrunkStream::update_blast`]): a kind-4
//!   preamble from the node's shim sets (or withdraws) the request of a
//!   connection this relay already splices, for the data this relay sends
//!   ([`BlastSwitch`](super::blast::BlastSwitch), read by the stream task before each bulk decision).
//!   Switching at any read boundary keeps the bytes in order: trunk bytes
//!   written so far fix the offset at which the next blast is announced.
//!
//! The files, each using only those listed before it (and the TCP trunk,
//! [`super::trunk`] and [`super::tcp`], below them all):
//!
//! * [`link`]: the RBUDP state of one trunk, kept in the trunk's state;
//! * [`stats`]: counters of sessions, and those of closed sessions;
//! * [`session`]: a trunk's session at work: its events and control
//!   messages ([`session::pump`]), blasts sent ([`session::send_blast`])
//!   and received ([`session::next`], [`session::release`]);
//! * [`policy`]: whether and how a stream to an rbudp peer blasts;
//! * [`udp`]: the relay's UDP socket, the receive task, each trunk's
//!   blaster, starting and stopping a trunk's session.

pub mod link;
pub mod policy;
pub mod session;
pub mod stats;
pub mod udp;
