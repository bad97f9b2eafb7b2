//! Peak power control of Yum et al. §5: P_total = P_RT + P_BE < P_peak.
//!
//! - **Real-time** ([`RtPower`]): an extension of admission control. Every router i
//!   holds a real-time power budget P_RT(i), P_RT split evenly over the routers (the
//!   paper's E_router·kR/f each, whose sum is P_RT); a connection's probe is accepted
//!   by a router only if P_RT(i) covers E(i)·r/f, r the connection's solicited rate and
//!   f the flit's bits, which is then subtracted (and given back when the connection
//!   releases the router).
//! - **Best effort** ([`EnergyGate`], a gate on the HCAs' DMA): each HCA holds an
//!   energy budget E_BE = P_BE/n·T; a best-effort packet of N flits over D hops is
//!   taken only if its energy E_packet fits, which is subtracted and restored
//!   L_packet = ((D + 1)·S − 1) + N + W_HCA cycles later.
//!
//! Where this model's energies differ from the paper's formulas, and why: our power is
//! Table 1's routers and links plus the HCAs' energy per flit sent, calibrated so that
//! the mesh draws Fig 3's 21 W at 50 % ([`super::power`]), and nearly all of it is the
//! HCAs'. So the energy a flit costs "at router i" is E_router plus its output link,
//! and at the source's router also the HCA's link into it and the HCA's own energy;
//! E_packet is the paper's (E_router·(D + 1) + E_link·D)·N plus those two links and
//! the HCA's energy, N·(2·E_link + E_HCA). With the paper's narrower E_router and
//! E_packet the budgets would govern a twentieth of the power the meter measures.
//! Both budgets then sum, flit for flit, to what [`super::power::PowerMeter`] counts.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use qos_core::units::Bandwidth;

use super::error::ConfigError;
use super::hca::DmaGate;
#[cfg(test)]
use super::power::EnergySpec;
use super::power::{be_budget, l_packet, BeParams, FlitEnergy};
pub use super::power::{PowerControlSpec, Restore};
use super::traffic::TrafficClass;
use crate::flit::topology::Fabric;

/// The real-time part: every router's power budget P_RT(i), charged by probes.
#[derive(Debug, Clone)]
pub struct RtPower {
    fe: FlitEnergy,
    flit_bits: f64,
    /// Per router: what is left of P_RT(i) (W).
    pub left: Vec<f64>,
    /// Per connection: the hops (bit h: hop h) that charged it.
    charged: Vec<u64>,
    /// Probes refused for power.
    pub refused: u64,
}

impl RtPower {
    /// P_RT = `p_rt` W split evenly over `routers` routers, for `conns` connections.
    pub fn new(p_rt: f64, routers: u32, conns: usize, fe: FlitEnergy, flit_bits: u32) -> RtPower {
        RtPower {
            fe,
            flit_bits: flit_bits as f64,
            left: vec![p_rt / routers.max(1) as f64; routers as usize],
            charged: vec![0; conns],
            refused: 0,
        }
    }

    /// E(i)·r/f: what a connection of rate `r` costs the router at `hop` of its path
    /// (W); hop 0, the source's router, also carries the HCA's injection.
    pub fn need(&self, hop: usize, r: Bandwidth) -> f64 {
        let flits_per_s = r.bytes_per_sec() as f64 * 8.0 / self.flit_bits;
        let pj = self.fe.hop + if hop == 0 { self.fe.injection } else { 0.0 };
        pj * 1e-12 * flits_per_s
    }

    /// The probe of connection `conn` at `hop` (router `router`): charges it if the
    /// budget covers it; `false` (a refusal, counted) otherwise.
    pub fn admit(&mut self, conn: u32, hop: usize, router: u32, r: Bandwidth) -> bool {
        let w = self.need(hop, r);
        let left = &mut self.left[router as usize];
        // A relative tolerance, so sums of equal charges fill a budget exactly.
        if w > *left + 1e-12 * w.max(1.0) {
            self.refused += 1;
            return false;
        }
        *left -= w;
        self.charged[conn as usize] |= 1 << hop.min(63);
        true
    }

    /// Connection `conn` releases the router at `hop` (nothing if it was not charged).
    pub fn release(&mut self, conn: u32, hop: usize, router: u32, r: Bandwidth) {
        let bit = 1u64 << hop.min(63);
        let c = &mut self.charged[conn as usize];
        if *c & bit != 0 {
            *c &= !bit;
            self.left[router as usize] += self.need(hop, r);
        }
    }
}

/// The best-effort part: each HCA's energy budget, a gate on its DMA.
#[derive(Debug, Clone)]
pub struct EnergyGate {
    fe: FlitEnergy,
    flit_bytes: u64,
    /// S and the routers between every pair: D = routers − 1.
    hop_cycles: u64,
    nodes: u32,
    routers_on: Vec<u32>,
    restore: Restore,
    /// An HCA's share of P_BE, in pJ per cycle.
    rate: f64,
    /// E_BE per HCA (pJ), what each has left, and when it was last refilled
    /// (`refill`, `after_l_packet`).
    pub budget: f64,
    left: Vec<f64>,
    last: Vec<u64>,
    /// T, and per HCA (`period`): the current period, the energy of the packets
    /// whose tails left in it, the energy of the packets taken and not yet gone, and
    /// each of those by its fabric packet.
    period: u64,
    current: Vec<u64>,
    done: Vec<f64>,
    outstanding: Vec<f64>,
    pending: Vec<Vec<f64>>,
    /// Per HCA: (cycle, energy) to restore, earliest first (`after_l_packet`).
    due: Vec<BinaryHeap<Reverse<(u64, u64)>>>,
    /// Per HCA: flits taken and not yet on the link (W_HCA's estimate).
    queued: Vec<u64>,
    /// Best-effort packets held back (per node and cycle asked).
    pub held: u64,
}

impl EnergyGate {
    /// The gate of `fab` with the budgets of [`be_budget`]; refused when one
    /// packet's energy exceeds the budget.
    pub fn new(fab: &Fabric, fe: FlitEnergy, p: &BeParams) -> Result<EnergyGate, ConfigError> {
        let n = fab.nodes;
        let routers_on = (0..n * n)
            .map(|i| fab.routers_on_path(i / n, i % n).max(1))
            .collect();
        let (budget, period) = be_budget(fab, &fe, p)?;
        Ok(EnergyGate {
            fe,
            flit_bytes: p.flit_bytes.max(1),
            hop_cycles: p.hop_cycles,
            nodes: n,
            routers_on,
            restore: p.restore,
            rate: p.p_be / n.max(1) as f64 * p.cycle_s * 1e12,
            budget,
            left: vec![budget; n as usize],
            last: vec![0; n as usize],
            period: period.max(1),
            current: vec![0; n as usize],
            done: vec![0.0; n as usize],
            outstanding: vec![0.0; n as usize],
            pending: vec![Vec::new(); n as usize],
            due: vec![BinaryHeap::new(); n as usize],
            queued: vec![0; n as usize],
            held: 0,
        })
    }

    /// E_packet and L_packet of a packet of `bytes` from `node` to `dst`.
    fn cost(&self, node: u32, dst: u32, bytes: u64) -> (f64, u64) {
        let n = bytes.div_ceil(self.flit_bytes) as u32;
        let r = self
            .routers_on
            .get((node * self.nodes + dst) as usize)
            .copied()
            .unwrap_or(1);
        let d = r.saturating_sub(1);
        let w = self.queued[node as usize];
        (self.fe.packet(d, n), l_packet(d, self.hop_cycles, n, w))
    }

    /// Brings `node`'s budget up to `now`.
    fn restore(&mut self, node: usize, now: u64) {
        match self.restore {
            Restore::Period => {
                let k = now / self.period;
                if k != self.current[node] {
                    self.current[node] = k;
                    self.done[node] = 0.0;
                }
            }
            Restore::Refill => {
                let dt = now.saturating_sub(self.last[node]);
                self.left[node] = (self.left[node] + self.rate * dt as f64).min(self.budget);
                self.last[node] = now.max(self.last[node]);
            }
            Restore::AfterLPacket => {
                let h = &mut self.due[node];
                while let Some(&Reverse((at, bits))) = h.peek() {
                    if at > now {
                        break;
                    }
                    h.pop();
                    self.left[node] = (self.left[node] + f64::from_bits(bits)).min(self.budget);
                }
            }
        }
    }
}

impl DmaGate for EnergyGate {
    fn allows(&mut self, node: u32, dst: u32, class: u8, bytes: u64, now: u64) -> bool {
        if class != TrafficClass::BestEffort as u8 {
            return true;
        }
        self.restore(node as usize, now);
        let (e, _) = self.cost(node, dst, bytes);
        let i = node as usize;
        let ok = if self.restore == Restore::Period {
            self.done[i] + self.outstanding[i] + e <= self.budget * (1.0 + 1e-12)
        } else {
            e <= self.left[node as usize] + 1e-9 * e
        };
        if !ok {
            self.held += 1;
        }
        ok
    }

    fn taken(&mut self, node: u32, pkt: u32, dst: u32, class: u8, bytes: u64, now: u64) {
        if class == TrafficClass::BestEffort as u8 {
            self.restore(node as usize, now);
            let (e, l) = self.cost(node, dst, bytes);
            if self.restore == Restore::Period {
                let p = &mut self.pending[node as usize];
                if p.len() <= pkt as usize {
                    p.resize(pkt as usize + 1, 0.0);
                }
                p[pkt as usize] = e;
                self.outstanding[node as usize] += e;
            }
            let left = &mut self.left[node as usize];
            *left = (*left - e).max(0.0);
            if self.restore == Restore::AfterLPacket {
                self.due[node as usize].push(Reverse((now + l, e.to_bits())));
            }
        }
        self.queued[node as usize] += bytes.div_ceil(self.flit_bytes);
    }

    fn injected(&mut self, node: u32, pkt: u32, bytes: u64, now: u64) {
        let i = node as usize;
        let q = &mut self.queued[i];
        *q = q.saturating_sub(bytes.div_ceil(self.flit_bytes));
        if self.restore == Restore::Period {
            let e = self.pending[i]
                .get_mut(pkt as usize)
                .map_or(0.0, std::mem::take);
            if e > 0.0 {
                self.restore(i, now);
                self.outstanding[i] = (self.outstanding[i] - e).max(0.0);
                self.done[i] += e;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packets_energy_is_the_papers_plus_the_hca_links_and_the_hca() {
        let e = EnergySpec {
            hca_pj_per_flit: 1000.0,
            ..EnergySpec::default()
        };
        let fe = FlitEnergy::new(&e, 128);
        // 40 flits over D = 2 hops: three routers, two links between them (the
        // paper's), two HCA links and one HCA.
        let paper = (132.77586 * 3.0 + 1306.88 * 2.0) * 40.0;
        let ours = paper + 40.0 * (2.0 * 1306.88 + 1000.0);
        assert!(
            (fe.packet(2, 40) - ours).abs() < 1e-6,
            "{}",
            fe.packet(2, 40)
        );
        // The same as a flit's hops: three routers with their output links, plus the
        // injection.
        assert!((fe.packet(2, 40) - 40.0 * (3.0 * fe.hop + fe.injection)).abs() < 1e-6);
    }

    #[test]
    fn probes_charge_routers_until_the_budget_is_spent_and_releases_give_it_back() {
        let e = EnergySpec::default();
        let fe = FlitEnergy::new(&e, 128);
        // A 1 W budget over 2 routers: 0.5 W each.
        let mut rt = RtPower::new(1.0, 2, 4, fe, 128);
        let r = Bandwidth::from_bits_per_sec(100_000_000);
        // E(i)·r/f at a transit hop: 1439.65586 pJ × 781,250 flits/s.
        let w = rt.need(1, r);
        assert!((w - 1439.65586e-12 * 781_250.0).abs() < 1e-12);
        assert!(rt.need(0, r) > w);
        let fit = (0.5 / w).floor() as u32;
        for c in 0..fit.min(4) {
            assert!(rt.admit(c, 1, 1, r));
        }
        let left = 0.5 - fit.min(4) as f64 * w;
        assert!((rt.left[1] - left).abs() < 1e-12);
        // A router whose budget does not cover the connection refuses it.
        let big = Bandwidth::from_bits_per_sec(100_000_000_000);
        assert!(!rt.admit(3, 2, 0, big));
        assert_eq!(rt.refused, 1);
        assert_eq!(rt.left[0], 0.5);
        // Releasing gives exactly what was charged, once; an uncharged hop gives
        // nothing.
        rt.release(0, 1, 1, r);
        rt.release(0, 1, 1, r);
        rt.release(3, 2, 0, big);
        assert!((rt.left[1] - (left + w)).abs() < 1e-12);
        assert_eq!(rt.left[0], 0.5);
    }

    fn mesh(k: u32) -> Fabric {
        crate::flit::config::TopologySpec::mesh(k).fabric().unwrap()
    }

    /// Parameters on 1 ns cycles, S = 5, 10-flit packets of 16 bytes.
    fn params(p_be: f64, window: Option<u64>, restore: Restore) -> BeParams {
        BeParams {
            p_be,
            window,
            restore,
            cycle_s: 1e-9,
            hop_cycles: 5,
            packet_flits: 10,
            sample_cycles: 500,
            flit_bytes: 16,
        }
    }

    /// A greedy HCA 0 sending to its neighbour (D = 1) whenever the gate allows, for
    /// `cycles`, each packet's tail leaving `delay(i)` cycles after the i-th packet is
    /// taken: the cycles at which the tails left.
    fn greedy_delayed(g: &mut EnergyGate, cycles: u64, delay: &dyn Fn(u32) -> u64) -> Vec<u64> {
        let be = TrafficClass::BestEffort as u8;
        let mut out: Vec<(u64, u32)> = Vec::new();
        let mut tails = Vec::new();
        let mut pkt = 0u32;
        for now in 0..cycles {
            while let Some(i) = out.iter().position(|&(t, _)| t == now) {
                let (_, p) = out.swap_remove(i);
                g.injected(0, p, 160, now);
                tails.push(now);
            }
            if g.allows(0, 1, be, 160, now) {
                g.taken(0, pkt, 1, be, 160, now);
                out.push((now + delay(pkt), pkt));
                pkt += 1;
            }
        }
        tails
    }

    fn greedy(g: &mut EnergyGate, cycles: u64) -> Vec<u64> {
        greedy_delayed(g, cycles, &|_| 1)
    }

    #[test]
    fn the_energy_budget_holds_packets_back_and_returns_after_l_packet() {
        let fab = mesh(2);
        let fe = FlitEnergy::new(&EnergySpec::default(), 128);
        // A budget of exactly two neighbour packets: T cycles of 1 ns at P_BE.
        let one = fe.packet(1, 10);
        let t = 100u64;
        let p_be = 2.0 * one * 4.0 / (t as f64 * 1e-9 * 1e12);
        let mut g =
            EnergyGate::new(&fab, fe, &params(p_be, Some(t), Restore::AfterLPacket)).unwrap();
        assert!((g.budget - 2.0 * one).abs() < 1e-6);
        let be = TrafficClass::BestEffort as u8;
        // Node 0 (0,0) to node 1 (1,0): D = 1.
        for _ in 0..2 {
            assert!(g.allows(0, 1, be, 160, 0));
            g.taken(0, 9, 1, be, 160, 0);
        }
        assert!(!g.allows(0, 1, be, 160, 1));
        assert_eq!(g.held, 1);
        // Real time is not the gate's.
        assert!(g.allows(0, 1, TrafficClass::RealTime as u8, 160, 1));
        // L_packet of the first: (2·5 − 1) + 10 + W_HCA = 0 → 19; of the second,
        // 10 flits queued ahead → 29.
        assert!(!g.allows(0, 1, be, 160, 18));
        assert!(g.allows(0, 1, be, 160, 19));
        g.taken(0, 9, 1, be, 160, 19);
        assert!(!g.allows(0, 1, be, 160, 28));
        assert!(g.allows(0, 1, be, 160, 29));
        // Another HCA's budget is its own.
        assert!(g.allows(2, 3, be, 160, 0));
    }

    #[test]
    fn period_budgets_bound_every_period_and_refills_bound_the_mean() {
        let fab = mesh(2);
        let fe = FlitEnergy::new(&EnergySpec::default(), 128);
        let one = fe.packet(1, 10);
        // An HCA's share of P_BE: one packet every 100 cycles; T = 200: E_BE = 2.
        let p_be = one / 100.0 * 4.0 / (1e-9 * 1e12);
        // Per period: the packets whose tails leave in a period, with those still in
        // the HCA, never exceed E_BE — however late their tails leave (here 5 to 395
        // cycles after they were taken, in no order).
        let mut g = EnergyGate::new(&fab, fe, &params(p_be, Some(200), Restore::Period)).unwrap();
        let tails = greedy_delayed(&mut g, 10_000, &|i| 5 + (i as u64 * 97) % 391);
        let mut per_period = vec![0u32; 51];
        for &t in &tails {
            per_period[(t / 200) as usize] += 1;
        }
        assert!(per_period.iter().all(|&n| n <= 2), "{per_period:?}");
        assert!(tails.len() > 40, "{}", tails.len());
        assert!(g.held > 0);
        // Leaving a cycle later: two packets in every period.
        let mut g = EnergyGate::new(&fab, fe, &params(p_be, Some(200), Restore::Period)).unwrap();
        assert_eq!(greedy(&mut g, 10_000).len(), 100);
        // Refill: at most E_BE + rate × interval — 2 + 100 packets, the first two at
        // once.
        let mut g = EnergyGate::new(&fab, fe, &params(p_be, Some(200), Restore::Refill)).unwrap();
        assert_eq!(greedy(&mut g, 10_000).len(), 101);
        assert!(g.held > 0);
        // The paper's restore after L_packet only bounds the energy in flight: the
        // same HCA sends a packet every L_packet = 19 cycles, five times as many.
        let mut g =
            EnergyGate::new(&fab, fe, &params(p_be, Some(200), Restore::AfterLPacket)).unwrap();
        assert!(greedy(&mut g, 10_000).len() > 5 * 101);
    }

    #[test]
    fn a_budget_below_one_packet_is_refused_at_its_key() {
        let fab = mesh(4);
        let fe = FlitEnergy::new(&EnergySpec::default(), 128);
        let mesh_params = |p_be, window, restore| BeParams {
            cycle_s: 51.2e-9,
            packet_flits: 40,
            ..params(p_be, window, restore)
        };
        for restore in [Restore::Period, Restore::Refill, Restore::AfterLPacket] {
            let err = EnergyGate::new(&fab, fe, &mesh_params(1e-6, Some(10), restore)).unwrap_err();
            assert_eq!(err.path, "power_control.window");
        }
        // Per period: T is the power sample's period by default.
        let ok = EnergyGate::new(&fab, fe, &mesh_params(21.0, None, Restore::Period)).unwrap();
        assert!((ok.budget - 21.0 / 16.0 * 500.0 * 51.2e-9 * 1e12).abs() < 1e-3);
        // After L_packet: the least T that holds the dearest packet (D = 6 in a 4x4
        // mesh).
        let ok =
            EnergyGate::new(&fab, fe, &mesh_params(21.0, None, Restore::AfterLPacket)).unwrap();
        assert!(ok.budget >= fe.packet(6, 40));
        assert!(ok.budget < fe.packet(6, 40) + 21.0 / 16.0 * 51.2e-9 * 1e12 + 1e-6);
    }

    #[test]
    fn bad_values_name_their_key() {
        let s: PowerControlSpec =
            toml::from_str("kind = \"credits\"\nreal_time_share = 1.5").unwrap();
        assert_eq!(
            s.validate().unwrap_err().path,
            "power_control.real_time_share"
        );
        let s: PowerControlSpec = toml::from_str("kind = \"powerherd\"\nshare = -1").unwrap();
        assert_eq!(s.validate().unwrap_err().path, "power_control.share");
        let s: PowerControlSpec = toml::from_str("kind = \"credits\"\npeak_w = 0").unwrap();
        assert_eq!(s.validate().unwrap_err().path, "power_control.peak_w");
        assert!(toml::from_str::<PowerControlSpec>("kind = \"credits\"\npeak = 3").is_err());
    }
}
