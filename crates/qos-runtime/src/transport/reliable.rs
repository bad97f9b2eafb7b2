//! Reliable in-order delivery per flow (GM's guarantee, thesis §4.1: "reliable delivery
//! between end-points ... message order is preserved for messages of the same priority
//! between the same sending and receiving ports"), rebuilt over UDP.
//!
//! Pure state machines with time passed in, like qos-core: [`SendFlow`] keeps packets in
//! flight until acknowledged (cumulative + 64-bit selective acks), retransmits on a timer
//! with exponential back-off and on SACK holes, and never sends past the receiver's window.
//! [`RecvFlow`] accepts packets in any order, hands them up strictly in sequence, and
//! advertises a window of `capacity` packets counted from the first packet the upper layer
//! has not yet taken — so a slow receiver stops its sender (no loss) and holds at most
//! `capacity` packets per flow (no unbounded memory).

use std::collections::{BTreeMap, VecDeque};

use qos_core::units::{Duration, Time};

/// `a < b` in sequence space (wrapping, RFC 1982 style).
pub fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// Retransmission settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetxConfig {
    /// First retransmission timeout.
    pub rto: Duration,
    /// Upper bound on the backed-off timeout.
    pub max_rto: Duration,
    /// A hole is retransmitted at once when this many later packets are selectively acked.
    pub dup_threshold: u32,
}

impl Default for RetxConfig {
    fn default() -> Self {
        RetxConfig {
            rto: Duration::from_ms(20),
            max_rto: Duration::from_ms(500),
            dup_threshold: 3,
        }
    }
}

#[derive(Debug, Clone)]
struct InFlight<F> {
    seq: u32,
    frag: F,
    sent_at: Time,
    retries: u32,
    sacked: bool,
    fast_retx: bool,
}

/// Sender side of one flow. `F` is whatever the caller needs to re-emit a packet
/// (a message handle and an offset, typically).
#[derive(Debug)]
pub struct SendFlow<F> {
    cfg: RetxConfig,
    next_seq: u32,
    window: u32,
    inflight: VecDeque<InFlight<F>>,
    last_probe: Option<Time>,
    /// Smoothed round trip and its mean deviation, ps (RFC 6298), from packets acked
    /// without a retransmission (Karn's rule).
    srtt: Option<u64>,
    rttvar: u64,
    /// Current base timeout, ps: srtt + max(cfg.rto, 4·rttvar), at most cfg.max_rto.
    rto: u64,
    /// Retransmissions made (for statistics).
    pub retransmits: u64,
}

impl<F: Clone> SendFlow<F> {
    /// A new flow; the receiver's initial window is `initial_window` packets.
    pub fn new(cfg: RetxConfig, initial_window: u32) -> Self {
        SendFlow {
            cfg,
            next_seq: 0,
            window: initial_window,
            inflight: VecDeque::new(),
            last_probe: None,
            srtt: None,
            rttvar: 0,
            rto: cfg.rto.as_ps(),
            retransmits: 0,
        }
    }

    /// The current base retransmission timeout: at least the configured one, more when
    /// the measured round trip (queues in shapers and switches included) is longer, so
    /// that a slow path is not flooded with spurious retransmissions.
    pub fn rto(&self) -> Duration {
        Duration::from_ps(self.rto)
    }

    fn rtt_sample(&mut self, r: u64) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                self.rttvar = (3 * self.rttvar + srtt.abs_diff(r)) / 4;
                self.srtt = Some((7 * srtt + r) / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        // RFC 6298's srtt + max(G, 4·rttvar), with the configured timeout as G: a
        // steady queue (rttvar → 0) still leaves that much margin over the round trip.
        self.rto = srtt
            .saturating_add((4 * self.rttvar).max(self.cfg.rto.as_ps()))
            .min(self.cfg.max_rto.as_ps());
    }

    /// May a new packet be sent now (is it inside the receiver's window)?
    pub fn can_send(&self) -> bool {
        seq_lt(self.next_seq, self.window)
    }

    /// Packets sent and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// Records a new packet as sent at `now`; returns its sequence number.
    pub fn on_send(&mut self, now: Time, frag: F) -> u32 {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.inflight.push_back(InFlight {
            seq,
            frag,
            sent_at: now,
            retries: 0,
            sacked: false,
            fast_retx: false,
        });
        seq
    }

    /// Applies an acknowledgement. Every fragment newly known to be delivered is passed
    /// to `delivered`; packets to retransmit at once (SACK holes) are pushed to `retx`.
    pub fn on_ack(
        &mut self,
        now: Time,
        cum_ack: u32,
        window: u32,
        sack: u64,
        mut delivered: impl FnMut(F),
        retx: &mut Vec<(u32, F)>,
    ) {
        // Ignore acks for data never sent (hostile or corrupt peer).
        if seq_lt(self.next_seq, cum_ack) {
            return;
        }
        if seq_lt(self.window, window) {
            self.window = window;
        }
        let mut sample = None;
        while let Some(front) = self.inflight.front() {
            if seq_lt(front.seq, cum_ack) {
                let p = self.inflight.pop_front().expect("front exists");
                if p.retries == 0 && !p.fast_retx && !p.sacked {
                    sample = Some(now.saturating_since(p.sent_at).as_ps());
                }
                if !p.sacked {
                    delivered(p.frag);
                }
            } else {
                break;
            }
        }
        if let Some(r) = sample {
            self.rtt_sample(r);
        }
        if sack == 0 {
            return;
        }
        let mut highest = None;
        for p in self.inflight.iter_mut() {
            let d = p.seq.wrapping_sub(cum_ack);
            if (1..=64).contains(&d) && sack & (1u64 << (d - 1)) != 0 {
                if !p.sacked {
                    p.sacked = true;
                    delivered(p.frag.clone());
                }
                highest = Some(d);
            }
        }
        if let Some(h) = highest {
            for p in self.inflight.iter_mut() {
                let d = p.seq.wrapping_sub(cum_ack);
                if d >= h {
                    break;
                }
                if !p.sacked && !p.fast_retx && h - d >= self.cfg.dup_threshold {
                    p.fast_retx = true;
                    p.sent_at = now;
                    self.retransmits += 1;
                    retx.push((p.seq, p.frag.clone()));
                }
            }
        }
    }

    fn timeout(&self, retries: u32) -> Duration {
        let scaled = self.rto.saturating_mul(1u64 << retries.min(16));
        Duration::from_ps(scaled.min(self.cfg.max_rto.as_ps()))
    }

    /// Packets whose retransmission timer has expired at `now` (their timers restart).
    pub fn due_retransmits(&mut self, now: Time, out: &mut Vec<(u32, F)>) {
        for i in 0..self.inflight.len() {
            let t = self.timeout(self.inflight[i].retries);
            let p = &mut self.inflight[i];
            if !p.sacked && p.sent_at.saturating_add(t) <= now {
                p.sent_at = now;
                p.retries += 1;
                p.fast_retx = false;
                self.retransmits += 1;
                out.push((p.seq, p.frag.clone()));
            }
        }
    }

    /// Should a window probe be sent now? True when the window is closed, nothing is in
    /// flight (so no ack will come by itself) and a timeout has passed since the last probe.
    pub fn probe_due(&mut self, now: Time, has_pending: bool) -> bool {
        if !has_pending || self.can_send() || !self.inflight.is_empty() {
            self.last_probe = None;
            return false;
        }
        match self.last_probe {
            Some(t) if t.saturating_add(self.cfg.rto) > now => false,
            Some(_) => {
                self.last_probe = Some(now);
                true
            }
            None => {
                self.last_probe = Some(now);
                false
            }
        }
    }

    /// Earliest time a timer of this flow fires.
    pub fn next_timer(&self) -> Option<Time> {
        let retx = self
            .inflight
            .iter()
            .filter(|p| !p.sacked)
            .map(|p| p.sent_at.saturating_add(self.timeout(p.retries)))
            .min();
        let probe = self.last_probe.map(|t| t.saturating_add(self.cfg.rto));
        match (retx, probe) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// What the receiver did with a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Stored (in order or not).
    Stored,
    /// Already received: a duplicate, dropped.
    Duplicate,
    /// Beyond the advertised window: dropped (a compliant sender never does this).
    OutsideWindow,
}

/// Receiver side of one flow.
#[derive(Debug)]
pub struct RecvFlow<P> {
    capacity: u32,
    expected: u32,
    ready: VecDeque<P>,
    ooo: BTreeMap<u32, P>,
    ack_pending: bool,
    advertised: u32,
}

impl<P> RecvFlow<P> {
    /// A receiver that holds at most `capacity` packets of this flow.
    pub fn new(capacity: u32) -> Self {
        let capacity = capacity.max(1);
        RecvFlow {
            capacity,
            expected: 0,
            ready: VecDeque::new(),
            ooo: BTreeMap::new(),
            ack_pending: false,
            advertised: capacity,
        }
    }

    /// First sequence number the sender may not send.
    pub fn window(&self) -> u32 {
        self.expected
            .wrapping_sub(self.ready.len() as u32)
            .wrapping_add(self.capacity)
    }

    /// Packets held (in order awaiting the upper layer, and out of order).
    pub fn held(&self) -> usize {
        self.ready.len() + self.ooo.len()
    }

    /// Takes a data packet.
    pub fn on_data(&mut self, seq: u32, packet: P) -> Accepted {
        self.ack_pending = true;
        if seq_lt(seq, self.expected) {
            return Accepted::Duplicate;
        }
        if !seq_lt(seq, self.window()) {
            return Accepted::OutsideWindow;
        }
        if seq != self.expected {
            if self.ooo.contains_key(&seq) {
                return Accepted::Duplicate;
            }
            self.ooo.insert(seq, packet);
            return Accepted::Stored;
        }
        self.ready.push_back(packet);
        self.expected = self.expected.wrapping_add(1);
        while let Some(p) = self.ooo.remove(&self.expected) {
            self.ready.push_back(p);
            self.expected = self.expected.wrapping_add(1);
        }
        Accepted::Stored
    }

    /// A probe arrived: answer with an ack.
    pub fn on_probe(&mut self) {
        self.ack_pending = true;
    }

    /// The next in-order packet, if the upper layer can take it.
    pub fn front(&self) -> Option<&P> {
        self.ready.front()
    }

    /// Hands the next in-order packet to the upper layer (opening the window by one).
    pub fn pop(&mut self) -> Option<P> {
        let p = self.ready.pop_front()?;
        // Announce a reopened window without waiting for more data once half of it is free.
        if self.window().wrapping_sub(self.advertised) >= self.capacity.div_ceil(2)
            || self.ready.is_empty()
        {
            self.ack_pending = true;
        }
        Some(p)
    }

    /// The acknowledgement to send, if one is owed: `(cum_ack, window, sack)`.
    pub fn take_ack(&mut self) -> Option<(u32, u32, u64)> {
        if !self.ack_pending {
            return None;
        }
        self.ack_pending = false;
        let mut sack = 0u64;
        for &s in self.ooo.keys() {
            let d = s.wrapping_sub(self.expected);
            if (1..=64).contains(&d) {
                sack |= 1u64 << (d - 1);
            }
        }
        self.advertised = self.window();
        Some((self.expected, self.advertised, sack))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Time {
        Time::ZERO + Duration::from_ms(ms)
    }

    #[test]
    fn sequence_comparison_wraps() {
        assert!(seq_lt(u32::MAX, 0));
        assert!(seq_lt(5, 6));
        assert!(!seq_lt(6, 6));
    }

    #[test]
    fn sender_stops_at_the_receivers_window_and_resumes_on_update() {
        let mut s: SendFlow<u32> = SendFlow::new(RetxConfig::default(), 2);
        s.on_send(t(0), 0);
        s.on_send(t(0), 1);
        assert!(!s.can_send());
        let mut done = vec![];
        s.on_ack(t(1), 2, 4, 0, |f| done.push(f), &mut vec![]);
        assert_eq!(done, vec![0, 1]);
        assert!(s.can_send());
    }

    #[test]
    fn lost_packet_is_retransmitted_after_the_timeout_with_backoff() {
        let cfg = RetxConfig::default();
        let mut s: SendFlow<u32> = SendFlow::new(cfg, 8);
        s.on_send(t(0), 7);
        let mut out = vec![];
        s.due_retransmits(t(19), &mut out);
        assert!(out.is_empty());
        s.due_retransmits(t(20), &mut out);
        assert_eq!(out, vec![(0, 7)]);
        out.clear();
        s.due_retransmits(t(59), &mut out);
        assert!(out.is_empty(), "second timeout is doubled");
        s.due_retransmits(t(60), &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn the_timeout_grows_with_a_long_measured_round_trip_and_never_shrinks_below_the_floor() {
        let cfg = RetxConfig::default();
        let mut s: SendFlow<u32> = SendFlow::new(cfg, 64);
        // Packets that sit 30 ms in a shaper's queue before their ack comes back.
        for i in 0..20u32 {
            s.on_send(t(i as u64 * 10), i);
            s.on_ack(t(i as u64 * 10 + 30), i + 1, 64, 0, |_| {}, &mut vec![]);
        }
        assert!(s.rto() > Duration::from_ms(30), "rto {}", s.rto());
        assert!(s.rto() <= cfg.max_rto);
        // So a packet 35 ms old is not resent: it is only as late as the path is slow.
        s.on_send(t(1000), 99);
        let mut out = vec![];
        s.due_retransmits(t(1035), &mut out);
        assert!(out.is_empty(), "spurious retransmission at rto {}", s.rto());
        // Fast round trips keep the configured timeout.
        let mut f: SendFlow<u32> = SendFlow::new(cfg, 64);
        for i in 0..20u32 {
            f.on_send(t(i as u64), i);
            f.on_ack(t(i as u64), i + 1, 64, 0, |_| {}, &mut vec![]);
        }
        assert_eq!(f.rto(), cfg.rto);
    }

    #[test]
    fn sack_hole_is_retransmitted_at_once_and_sacked_packets_are_not() {
        let mut s: SendFlow<u32> = SendFlow::new(RetxConfig::default(), 16);
        for i in 0..6 {
            s.on_send(t(0), i);
        }
        // Receiver has 0, misses 1, has 2..=5.
        let mut done = vec![];
        let mut retx = vec![];
        s.on_ack(t(1), 1, 20, 0b1111, |f| done.push(f), &mut retx);
        assert_eq!(done, vec![0, 2, 3, 4, 5]);
        assert_eq!(retx, vec![(1, 1)]);
        let mut out = vec![];
        s.due_retransmits(t(100), &mut out);
        assert_eq!(out, vec![(1, 1)], "only the hole is ever resent");
    }

    #[test]
    fn receiver_delivers_in_order_and_drops_duplicates() {
        let mut r: RecvFlow<u32> = RecvFlow::new(8);
        assert_eq!(r.on_data(1, 1), Accepted::Stored);
        assert_eq!(r.front(), None);
        assert_eq!(r.on_data(1, 1), Accepted::Duplicate);
        assert_eq!(r.on_data(0, 0), Accepted::Stored);
        assert_eq!(r.on_data(0, 0), Accepted::Duplicate);
        assert_eq!(r.pop(), Some(0));
        assert_eq!(r.pop(), Some(1));
        assert_eq!(r.pop(), None);
    }

    #[test]
    fn slow_receiver_closes_its_window_and_holds_bounded_memory() {
        let mut r: RecvFlow<u32> = RecvFlow::new(4);
        for i in 0..4 {
            assert_eq!(r.on_data(i, i), Accepted::Stored);
        }
        assert_eq!(r.on_data(4, 4), Accepted::OutsideWindow);
        assert_eq!(r.held(), 4);
        assert_eq!(r.take_ack(), Some((4, 4, 0)), "window closed at 4");
        r.pop();
        assert_eq!(
            r.take_ack(),
            None,
            "a quarter of the window is not worth an ack"
        );
        r.pop();
        assert_eq!(
            r.take_ack().map(|a| a.1),
            Some(6),
            "half the window taken reopens it"
        );
    }

    #[test]
    fn ack_carries_sack_bits_for_out_of_order_packets() {
        let mut r: RecvFlow<u32> = RecvFlow::new(70);
        r.on_data(2, 2);
        r.on_data(64, 64);
        let (cum, _, sack) = r.take_ack().unwrap();
        assert_eq!(cum, 0);
        assert_eq!(sack, (1 << 1) | (1 << 63));
    }

    #[test]
    fn probe_is_sent_only_when_window_closed_and_nothing_in_flight() {
        let mut s: SendFlow<u32> = SendFlow::new(RetxConfig::default(), 1);
        assert!(!s.probe_due(t(0), true));
        s.on_send(t(0), 0);
        s.on_ack(t(1), 1, 1, 0, |_| {}, &mut vec![]);
        assert!(!s.can_send());
        assert!(!s.probe_due(t(1), true), "arms the timer");
        assert!(!s.probe_due(t(10), true));
        assert!(s.probe_due(t(21), true));
        assert!(!s.probe_due(t(22), false));
    }
}
