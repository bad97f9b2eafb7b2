//! The admission side of the driver (§4.1, and §5's power budgets in the probes): a
//! connection's request, its probe checked by every router on its way, the answer at
//! its source, the release after a refusal, and the session's end by its final data
//! packet or by a release.

use super::*;

impl Driver<'_> {
    pub(super) fn request(&self, c: u32) -> Request {
        let k = &self.wl.connections()[c as usize];
        Request {
            conn: c,
            avg: k.solicit,
            peak: k.peak,
            lane: k.lane,
        }
    }

    /// Connection `c`'s source HCA releases its link (its arbiter is reloaded at the
    /// next cycle if the weights changed); `false` without admission control.
    pub(super) fn release_source(&mut self, c: u32) -> Result<bool, IbaError> {
        let req = self.request(c);
        let Some(adm) = &mut self.adm else {
            return Ok(false);
        };
        if adm
            .ledger
            .release_at_source(&self.paths[c as usize], &req)?
            .changed
        {
            self.hca_reload.push(self.wl.connections()[c as usize].src);
        }
        Ok(true)
    }

    /// Ends an admitted session at `now`: with a final data packet the source HCA
    /// releases its link as that packet leaves and each router as it passes;
    /// otherwise (nothing left to send) the source releases its link now and sends a
    /// release along the whole path.
    pub(super) fn end(&mut self, c: u32, now: u64, by_final: bool) -> Result<(), IbaError> {
        if self.state[c as usize] != Conn::Admitted {
            return Ok(());
        }
        self.state[c as usize] = Conn::Idle;
        if by_final {
            self.ended.0 += 1;
        } else {
            self.ended.1 += 1;
            if self.release_source(c)? {
                self.to_post
                    .push(self.probe(c, Kind::Release, u16::MAX as u32));
            }
        }
        self.next_session(c, now);
        Ok(())
    }

    pub(super) fn probe(&self, c: u32, kind: Kind, aux: u32) -> Post {
        let k = &self.wl.connections()[c as usize];
        Post {
            src: k.src,
            dst: k.dst,
            class: TrafficClass::Control as u8,
            vl: 15,
            len: 1,
            kind,
            tag: c,
            aux,
        }
    }

    pub(super) fn on_header(
        &mut self,
        h: &Header,
        at: &Place,
        out: &mut Outputs<'_>,
    ) -> Result<Verdict, IbaError> {
        let Some(adm) = &mut self.adm else {
            return Ok(Verdict::Pass);
        };
        // A final data packet releases each router once its tail has left it
        // ([`Driver::on_final_delivered`]): the router's arbiter must serve its lane
        // until then.
        if !matches!(h.kind, Kind::Probe | Kind::Release) {
            return Ok(Verdict::Pass);
        }
        let c = h.tag;
        let path = &self.paths[c as usize];
        let link = adm.output(at.router, at.out_port);
        let Some(hop) = Admission::hop(path, link) else {
            return Ok(Verdict::Pass);
        };
        let k = &self.wl.connections()[c as usize];
        let req = Request {
            conn: c,
            avg: k.solicit,
            peak: k.peak,
            lane: k.lane,
        };
        let (verdict, update) = match h.kind {
            Kind::Probe => {
                // Peak power control (§5): the router's power budget first; a probe it
                // does not cover is refused here as for bandwidth.
                let bw = req.avg;
                if let Some(p) = &mut self.rt_power {
                    if !p.admit(c, hop, at.router, bw) {
                        return Ok(Verdict::TurnAround {
                            kind: Kind::Nack,
                            aux: hop as u32,
                        });
                    }
                }
                let (v, u) = adm.ledger.at_router(path, hop, &req)?;
                if let (ProbeVerdict::Nack(_), Some(p)) = (&v, &mut self.rt_power) {
                    p.release(c, hop, at.router, bw);
                }
                let v = match v {
                    ProbeVerdict::Forward => Verdict::Pass,
                    ProbeVerdict::Ack => Verdict::TurnAround {
                        kind: Kind::Ack,
                        aux: 0,
                    },
                    ProbeVerdict::Nack(_) => Verdict::TurnAround {
                        kind: Kind::Nack,
                        aux: hop as u32,
                    },
                };
                (v, u)
            }
            _ => {
                if let Some(p) = &mut self.rt_power {
                    p.release(c, hop, at.router, req.avg);
                }
                let u = adm.ledger.release_at_router(path, hop, &req)?;
                let v = if release_visits(hop + 1, Rejecter::Router(h.aux as u16)) {
                    Verdict::Pass
                } else {
                    Verdict::Absorb
                };
                (v, u)
            }
        };
        if update.changed {
            if let Some(a) = adm.arbiter(link) {
                out.set(at.out_port, a);
            }
        }
        Ok(verdict)
    }

    /// A probe's answer reached its source: an ACK starts the connection, a NACK
    /// releases its link and sends a release towards the rejecting router.
    pub(super) fn on_answer(&mut self, d: &Delivered) -> Result<(), IbaError> {
        match d.kind {
            Kind::Ack => {
                let c = d.tag;
                if let Conn::Probing(t0) = self.state[c as usize] {
                    self.collector.set_up(self.time(t0), self.time(d.at), true);
                    self.start(c, d.at);
                }
            }
            Kind::Nack => {
                let c = d.tag;
                if let Conn::Probing(t0) = self.state[c as usize] {
                    self.state[c as usize] = Conn::Refused;
                    self.collector.set_up(self.time(t0), self.time(d.at), false);
                    self.next_session(c, d.at);
                    self.release_source(c)?;
                    if release_visits(0, Rejecter::Router(d.aux as u16)) {
                        self.to_post.push(self.probe(c, Kind::Release, d.aux));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
    /// The connection whose final data packet `d` is (none for a packet not in flight
    /// or of no connection).
    pub(super) fn final_conn(&self, d: &Delivered) -> Option<u32> {
        self.inflight
            .get(d.tag as usize)
            .copied()
            .flatten()
            .and_then(|m| m.conn)
    }

    /// A final data packet reached its destination, so its tail has left every router
    /// on its path: each releases what it charged for the connection (§4.1: "the HCA
    /// and routers release the reserved resources as this packet goes through them"),
    /// and the outputs whose weights changed get their arbiters at the next cycle.
    pub(super) fn on_final_delivered(&mut self, d: &Delivered) -> Result<(), IbaError> {
        let Some(c) = self.final_conn(d) else {
            return Ok(());
        };
        let req = self.request(c);
        let Some(adm) = &mut self.adm else {
            return Ok(());
        };
        let path = &self.paths[c as usize];
        for hop in 0..path.routers() {
            if let (Some(p), Some((r, _))) =
                (&mut self.rt_power, adm.router_port(path.links[hop + 1]))
            {
                p.release(c, hop, r, req.avg);
            }
            if adm.ledger.release_at_router(path, hop, &req)?.changed {
                self.out_reload.push(path.links[hop + 1]);
            }
        }
        Ok(())
    }

    /// A final data packet left its source HCA: the HCA releases its link (§4.1), and
    /// the session is over.
    pub(super) fn on_final_injected(&mut self, d: &Delivered) -> Result<(), IbaError> {
        let Some(c) = self.final_conn(d) else {
            return Ok(());
        };
        self.release_source(c)?;
        self.end(c, d.at, true)
    }
}
