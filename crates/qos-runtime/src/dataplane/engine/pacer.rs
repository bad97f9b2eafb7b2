//! The link pacer of the send engine: a NIC's send engine
//! cannot put packets on the wire faster than its link, so the backlog of a loaded node
//! waits in its packet scheduler, which decides the order. The agent's data plane sits
//! above the kernel's queues instead; without pacing, a work-conserving scheduler
//! (VirtualClock, round robin, GM rotation) would hand every packet to the socket at
//! once and the kernel's FIFO queue below it would decide the order. With a link rate
//! configured, the engine keeps the link's virtual finishing time and lets it run at
//! most [`LINK_BURST`] (or two full packets) ahead of real time, so the queue below
//! holds a few packets at most.

use qos_core::units::{Bandwidth, Bytes, Duration, Time};

use crate::dataplane::segment::IP_UDP_OVERHEAD;
use crate::transport::wire::{HEADER_LEN, TRAILER_LEN};

/// Ethernet header bytes of a frame (what a shaper on an Ethernet device counts besides
/// the IP packet).
pub const ETHERNET_HEADER: usize = 14;

/// How far ahead of the link the pacer lets the engine run, at least (see
/// [`LinkPacer::new`]): the agent then wakes about once per two packets at 10 MB/s,
/// not once per packet.
pub const LINK_BURST: Duration = Duration::from_us(250);

/// Bytes a data packet of `payload` bytes takes on an Ethernet link: our header and
/// authentication trailer, UDP, IPv4 and Ethernet headers added.
pub fn wire_bytes(payload: usize) -> usize {
    payload + HEADER_LEN + TRAILER_LEN + IP_UDP_OVERHEAD + ETHERNET_HEADER
}

/// The link's virtual clock: when it will have sent everything dispatched so far.
#[derive(Debug, Clone, Copy)]
pub struct LinkPacer {
    rate: Bandwidth,
    burst: Duration,
    free_at: Time,
}

impl LinkPacer {
    /// A pacer for a link of `rate` (wire bytes per second) carrying packets of up to
    /// `payload` bytes: it may run ahead of the link by [`LINK_BURST`] or two full
    /// packets, whichever is longer.
    pub fn new(rate: Bandwidth, payload: usize) -> LinkPacer {
        let two = rate
            .transfer_time(Bytes::new(2 * wire_bytes(payload) as u64))
            .unwrap_or(Duration::ZERO);
        LinkPacer {
            rate,
            burst: two.max(LINK_BURST),
            free_at: Time::ZERO,
        }
    }

    /// How far the pacer may run ahead of the link.
    pub fn burst(&self) -> Duration {
        self.burst
    }

    /// `None` if a packet may go at `now`; else the time from which one may.
    pub fn busy_until(&self, now: Time) -> Option<Time> {
        (self.free_at.saturating_since(now) > self.burst).then(|| self.free_at - self.burst)
    }

    /// A data packet of `payload` bytes went at `now`. An idle link does not save up
    /// time: lateness is never made up by a burst beyond the allowance.
    pub fn sent(&mut self, now: Time, payload: usize) {
        // A zero rate never finishes: hold everything (the caller asked for it).
        let t = self
            .rate
            .transfer_time(Bytes::new(wire_bytes(payload) as u64))
            .unwrap_or(Duration::MAX);
        self.free_at = self.free_at.max(now).saturating_add(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 MB/s, packets of 1400 bytes (1514 on the wire): 151.4 µs each; the allowance
    /// is two packets (302.8 µs > 250 µs).
    #[test]
    fn packets_leave_at_the_link_rate_after_a_burst_of_the_allowance() {
        let rate = Bandwidth::from_bytes_per_sec(10_000_000);
        let mut p = LinkPacer::new(rate, 1400);
        assert_eq!(wire_bytes(1400), 1514);
        assert_eq!(p.burst(), Duration::from_ps(302_800_000));
        let t0 = Time::ZERO + Duration::from_ms(1);
        // Three go at once: the link is then 454.2 µs ahead, beyond the allowance.
        for _ in 0..3 {
            assert_eq!(p.busy_until(t0), None);
            p.sent(t0, 1400);
        }
        let next = p.busy_until(t0).expect("the link is busy");
        assert_eq!(next, t0 + Duration::from_ps(151_400_000));
        assert_eq!(p.busy_until(next), None);
        // Over a long backlog the rate is the link's: 1000 packets take 999 packet times
        // after the first burst, whenever the engine comes back.
        let mut now = next;
        for _ in 0..1000 {
            if let Some(t) = p.busy_until(now) {
                now = t;
            }
            p.sent(now, 1400);
        }
        let per = (now - next).as_ps() as f64 / 1000.0;
        assert!(
            (per - 151_400_000.0).abs() < 1_000_000.0,
            "{per} ps per packet"
        );
    }

    #[test]
    fn an_idle_link_saves_no_credit_and_a_small_payload_costs_less() {
        let rate = Bandwidth::from_bytes_per_sec(1_000_000);
        let mut p = LinkPacer::new(rate, 1000);
        p.sent(Time::ZERO, 1000);
        // A second later the link has long been idle: only the allowance may go at once.
        let later = Time::ZERO + Duration::from_secs(1);
        let mut sent = 0;
        while p.busy_until(later).is_none() {
            p.sent(later, 100);
            sent += 1;
        }
        // 100-byte packets are 214 wire bytes (214 µs); the allowance is two full
        // packets (2 x 1114 µs = 2228 µs): after 11 the link is 2354 µs ahead.
        assert_eq!(sent, 11);
    }
}
