//! The credit side of the driver (§4.2): credits returned with their CQEs
//! (at the DMA, at injection, or with the receiver's ACK for the reliable service),
//! best-effort messages waiting on a returning CQ posted, real-time retries.

use super::*;

impl Driver<'_> {
    /// A WQE holding credit `h` completed (its CQE): the credit returns at the next
    /// cycle.
    pub(super) fn completed(&mut self, tag: u32) {
        if let Some(h) = self.credit_of.get_mut(tag as usize).and_then(|h| h.take()) {
            self.returned.push(h);
        }
    }

    /// Gives back the credits returned since the last cycle; a best-effort message
    /// waiting on a returning CQ takes its credit and is posted now.
    pub(super) fn return_credits<N: Net>(
        &mut self,
        net: &mut Poster<'_, N>,
        now: u64,
    ) -> Result<(), IbaError> {
        if self.credits.is_none() {
            return Ok(());
        }
        if self.cfg.hca.completion == Completion::Dma {
            let slots = std::mem::take(&mut self.adapters.borrow_mut().dma_completed);
            for s in slots {
                if let Some(&t) = self.slot_tag.get(s as usize) {
                    if t != NO_TAG {
                        self.completed(t);
                    }
                }
            }
        }
        for h in std::mem::take(&mut self.returned) {
            let c = self.credits.as_mut().expect("checked above");
            let next = c
                .give(h)
                .map_err(|e| FlitError::config("congestion", e.to_string()))?;
            if let Some(m) = next {
                self.post_held(m, Some(h), net, now)?;
            }
            if let Holder::Conn(k) = h {
                self.unpark(k, now);
            }
        }
        Ok(())
    }

    /// Connection `k`'s credit is back at `now`: its consumer, refused at cycle `t0`
    /// and trying again every `retry` cycles, gets it at its first attempt from now
    /// on; the attempts before that were refused too. (The same as queueing every
    /// attempt, without an event per refused attempt.)
    fn unpark(&mut self, k: u32, now: u64) {
        let Some(t0) = self.parked[k as usize].take() else {
            return;
        };
        let r = self.retry_cycles();
        let tries = now.saturating_sub(t0).div_ceil(r).max(1);
        if let Some(c) = self.credits.as_mut() {
            c.rt_refusals += tries - 1;
        }
        self.seq += 1;
        self.heap.push(Reverse((t0 + tries * r, self.seq, k + 1)));
    }

    /// Cycles a real-time consumer without a credit waits before it tries again.
    pub(super) fn retry_cycles(&self) -> u64 {
        match self.cfg.congestion {
            crate::iba::congestion::CongestionSpec::Credits { retry, .. } => {
                self.cfg.network.cycles(retry).max(1)
            }
            _ => 1,
        }
    }

    /// Reliable service (§4.2 footnote 3): the receiver of `m` sends an ACK back to
    /// its source, a one-flit control packet; its credit `h` returns when the ACK
    /// arrives.
    pub(super) fn acknowledge(&mut self, m: &Message, h: Holder) {
        let id = match self.free_acks.pop() {
            Some(i) => {
                self.acks[i as usize] = Some(h);
                i
            }
            None => {
                self.acks.push(Some(h));
                self.acks.len() as u32 - 1
            }
        };
        self.to_post.push(Post {
            src: m.dst,
            dst: m.src,
            class: TrafficClass::Control as u8,
            vl: 15,
            len: self.cfg.admission.probe_flits,
            kind: Kind::Ack,
            tag: id,
            aux: DATA_ACK,
        });
    }
}

/// `v[i] = x`, growing `v` with `fill`.
pub(super) fn set<T: Clone>(v: &mut Vec<T>, i: usize, x: T, fill: T) {
    if v.len() <= i {
        v.resize(i + 1, fill);
    }
    v[i] = x;
}
