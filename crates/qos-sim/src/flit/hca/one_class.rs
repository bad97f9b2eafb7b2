//! The HCAs' step when there is one class and no policy gate — every BookSim2-equivalent
//! configuration and the benchmark's reference one: BookSim2's source-queue terminal and
//! Yum's DMA HCA with a round-robin port make the decisions of the general step
//! (`Hcas::step_source`, `Hcas::step_one`) without the search over classes, with the
//! HCAs' arrays held in locals. A test runs both ways and compares every result.

use super::*;

impl Hcas {
    /// [`Hcas::step_source`] of the HCAs `nodes` when there is one class (BookSim2's
    /// configurations): the same decisions, without the search over classes, and with
    /// the HCAs' arrays held in locals, whose pointers stay in registers across the
    /// flits written into the routers (measured: about a third of the HCAs'
    /// instructions per cycle).
    pub(super) fn step_sources_one_class(&mut self, hot: &mut Hot<'_>, nodes: &[u32], now: u64) {
        let lanes = self.lanes;
        let t = now as Cycle;
        let class_lanes = self.class_lanes[0];
        let next = now + 1;
        let body_ready = (next + (hot.k.d.link + hot.k.d.sync) as u64) as Cycle;
        let head_ready = body_ready + hot.k.entry_route;
        let Hcas {
            sq,
            sq_lane,
            last_lane,
            dma_done,
            load,
            queued,
            next_active,
            busy_nodes,
            ..
        } = self;
        let (sq, sq_lane, last_lane, dma_done) = (
            &mut sq[..],
            &mut sq_lane[..],
            &mut last_lane[..],
            &mut dma_done[..],
        );
        let (load, queued) = (&mut load[..], &mut queued[..]);
        for &n in nodes {
            let n = n as usize;
            if queued[n] != now {
                continue;
            }
            if let Some(&pkt) = sq[n].front() {
                let vc_base = hot.fab.hca_port[n] as usize * lanes;
                let mut lane = sq_lane[n];
                let go = if lane == NO_LANE {
                    // The header takes the first lane with a credit after the last one.
                    let mut free = 0u32;
                    let mut m = class_lanes;
                    while m != 0 {
                        let l = m.trailing_zeros() as usize;
                        m &= m - 1;
                        if hot.host_lane_free(vc_base + l, t) {
                            free |= 1 << l;
                        }
                    }
                    match RoundRobin::first_from(free, last_lane[n] as u32 + 1) {
                        Some(l) => {
                            lane = l as u8;
                            sq_lane[n] = lane;
                            true
                        }
                        None => false,
                    }
                } else {
                    hot.host_credit_available(vc_base + lane as usize, t)
                };
                if go {
                    let p = pkt as usize;
                    let k = dma_done[n];
                    let len = hot.pk.len[p];
                    let mut word = pkt;
                    let mut ready = body_ready;
                    if k == 0 {
                        word |= HEAD;
                        ready = head_ready;
                        hot.pk.injected[p] = now;
                        hot.pk.vl[p] = lane;
                    }
                    if k + 1 == len {
                        word |= TAIL;
                        sq[n].pop_front();
                        dma_done[n] = 0;
                        sq_lane[n] = NO_LANE;
                        last_lane[n] = lane;
                        load[n] -= 1;
                        if load[n] == 0 {
                            *busy_nodes -= 1;
                        }
                        // The next packet counts as in flight from now.
                        if let Some(&next_pkt) = sq[n].front() {
                            let np = next_pkt as usize;
                            let nlen = hot.pk.len[np] as u64;
                            hot.stats.flight_flits[0] += nlen;
                            hot.stats.flight_created[0] += nlen * hot.pk.created[np];
                            front_measured(
                                &mut hot.pk.measured[np],
                                &mut hot.tally.outstanding,
                                hot.pk.created[np],
                                hot.window,
                                now,
                            );
                        }
                    } else {
                        dma_done[n] = k + 1;
                    }
                    hot.push_flit(vc_base + lane as usize, word, ready);
                    hot.tally.moved += 1;
                    hot.tally.in_network += 1;
                }
            }
            if load[n] > 0 && queued[n] != next {
                queued[n] = next;
                next_active.push(n as u32);
            }
        }
    }
}

impl Hcas {
    /// [`Hcas::step_one`] of the HCAs `nodes` when there is one class, no gate and the
    /// HCA port arbitrates round-robin (the benchmark's reference configuration): the
    /// same decisions, with the HCAs' arrays held in locals, whose pointers stay in
    /// registers across the flits written into the routers.
    pub(super) fn step_dmas_one_class(&mut self, hot: &mut Hot<'_>, nodes: &[u32], now: u64) {
        let (lanes, cap) = (self.lanes, self.cap);
        let t = now as Cycle;
        let next = now + 1;
        let body_ready = (now + (hot.k.d.link + hot.k.d.sync) as u64) as Cycle;
        let head_ready = body_ready + hot.k.entry_route;
        let Hcas {
            sq,
            dma_done,
            vlq,
            sent,
            held,
            mask,
            load,
            rr,
            queued,
            next_active,
            busy_nodes,
            ..
        } = self;
        let Some(rr) = rr.as_deref_mut() else {
            return;
        };
        let (sq, dma_done, vlq) = (&mut sq[..], &mut dma_done[..], &mut vlq[..]);
        let (sent, held, mask) = (&mut sent[..], &mut held[..], &mut mask[..]);
        let (load, queued) = (&mut load[..], &mut queued[..]);
        for &n in nodes {
            let n = n as usize;
            if queued[n] != now {
                continue;
            }
            // Send: the HCA port's round-robin over lanes with flits and credits.
            let vc_base = hot.fab.hca_port[n] as usize * lanes;
            let mut elig = 0u32;
            let mut m = mask[n];
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                if hot.host_credit_available(vc_base + l, t) {
                    elig |= 1 << l;
                }
            }
            if let Some(l) = RoundRobin::first_from(elig, rr[n] as u32) {
                rr[n] = (l + 1) as u8;
                let nl = n * lanes + l;
                let pkt = *vlq[nl].front().expect("held flits have a packet");
                let k = sent[nl];
                let len = hot.pk.len[pkt as usize];
                let mut word = pkt;
                let mut ready = body_ready;
                if k == 0 {
                    word |= HEAD;
                    ready = head_ready;
                    hot.pk.injected[pkt as usize] = now;
                }
                if k + 1 == len {
                    word |= TAIL;
                    vlq[nl].pop_front();
                    sent[nl] = 0;
                    load[n] -= 1;
                    if load[n] == 0 {
                        *busy_nodes -= 1;
                    }
                    if let Some(h) = hot.hooks.as_deref_mut() {
                        h.injected(&hot.pk.event(pkt, now));
                    }
                } else {
                    sent[nl] = k + 1;
                }
                held[nl] -= 1;
                if held[nl] == 0 {
                    mask[n] &= !(1 << l);
                }
                hot.push_flit(vc_base + l, word, ready);
                hot.tally.moved += 1;
            }
            // DMA: one flit of the class's front packet if its lane has room.
            if let Some(&pkt) = sq[n].front() {
                let l = hot.pk.vl[pkt as usize] as usize;
                let nl = n * lanes + l;
                if held[nl] < cap {
                    if dma_done[n] == 0 {
                        vlq[nl].push_back(pkt);
                    }
                    dma_done[n] += 1;
                    held[nl] += 1;
                    mask[n] |= 1 << l;
                    hot.tally.in_network += 1;
                    if dma_done[n] == hot.pk.len[pkt as usize] {
                        sq[n].pop_front();
                        dma_done[n] = 0;
                        // The next packet counts as in flight from now.
                        if let Some(&next_pkt) = sq[n].front() {
                            let np = next_pkt as usize;
                            let nlen = hot.pk.len[np] as u64;
                            hot.stats.flight_flits[0] += nlen;
                            hot.stats.flight_created[0] += nlen * hot.pk.created[np];
                        }
                    }
                }
            }
            if load[n] > 0 && queued[n] != next {
                queued[n] = next;
                next_active.push(n as u32);
            }
        }
    }
}
