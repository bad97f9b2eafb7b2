//! The energy model of Yum et al. §3.4: Table 1's
//! per-flit energies of a router (buffer write and read, arbitration, crossbar) and of
//! a link (per bit), an HCA's power as a documented parameter, and the network's power
//! sampled every N cycles ([`PowerMeter`]); with §5's arithmetic of a best-effort
//! packet's energy and time in the network ([`e_packet`], [`l_packet`]), which peak
//! power control will use.
//!
//! What a flit costs: every flit that crosses a router pays one buffer write, one
//! buffer read (its cell is power-gated after the read, so an idle buffer costs
//! nothing), one arbitration and one crossbar traversal — E_router — and every link it
//! crosses (the HCA's link into its router, each router's output link, including the
//! one into the destination's HCA) `link_pj_per_bit` × the flit's bits — E_link. The
//! paper's HCA (a StrongARM core, 8 MB of memory, DMA, doorbells) is given no numbers:
//! `hca_pj_per_flit` is the HCA's energy per flit it sends (its processing, memory and
//! DMA work grow with the traffic, as Fig 3's power proportional to the load implies),
//! 0 unless the scenario sets it.

use serde::{Deserialize, Serialize};

use super::error::ConfigError;

/// `[power_control]`: which peak power control a run has.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PowerControlSpec {
    /// Credit-based peak power control (§5).
    Credits {
        /// The peak, P_peak (W; default 21, §7.4's: Fig 3's power at 50 % load).
        #[serde(default = "peak")]
        peak_w: f64,
        /// P_RT ÷ P_peak (default: the workload's real-time fraction, `workload.mix`:
        /// "divided and distributed to each traffic class by its ratio").
        #[serde(default)]
        real_time_share: Option<f64>,
        /// T (cycles): an HCA's energy budget is E_BE = P_BE/n·T (default: the
        /// power sample's period, `power.sample_cycles`, with `restore = "period"` or
        /// `"refill"`; one dearest packet's worth with `"after_l_packet"`).
        #[serde(default)]
        window: Option<u64>,
        /// How spent budget comes back (default `refill`, see [`Restore`]).
        #[serde(default)]
        restore: Restore,
        /// S, the cycles of one router and link (default: the router pipeline's).
        #[serde(default)]
        hop_cycles: Option<u64>,
    },
    /// PowerHerd (Shang, Peh and Jha, the paper's [30]): per-router power budgets,
    /// exchanged between neighbours (`super::powerherd`).
    Powerherd {
        /// The peak (W; default 21).
        #[serde(default = "peak")]
        peak_w: f64,
        /// Cycles between budget exchanges (default 500).
        #[serde(default = "herd_window")]
        window: u64,
        /// The fraction of its spare budget a router hands to its neighbours that were
        /// held back in the window (default 0.5).
        #[serde(default = "half")]
        share: f64,
    },
}

/// How an HCA's best-effort energy budget E_BE = P_BE/n·T is spent and comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Restore {
    /// E_BE is granted for every period of T cycles (periods aligned on cycle 0, as
    /// the power samples are). A packet's E_packet is debited when it leaves the send
    /// queue and counts against every period until its tail has left the HCA; it is
    /// then settled in the period its tail left in. A packet leaves only if the
    /// period's settled packets, those still in the HCA and itself fit in E_BE — so
    /// however late back-pressure lets packets out, no period's packets exceed E_BE.
    #[default]
    Period,
    /// The budget refills continuously at the HCA's share of P_BE, up to E_BE: over
    /// any interval the HCA spends at most its share of P_BE times the interval, plus
    /// E_BE — the mean is held, single periods may exceed it by a packet or two.
    Refill,
    /// The paper's literal rule: a packet's E_packet returns L_packet cycles after it
    /// left. This bounds the energy in flight, not the power: once E_BE holds one
    /// packet, an HCA may send packets back to back (docs/yum.md).
    AfterLPacket,
}

fn peak() -> f64 {
    21.0
}
fn herd_window() -> u64 {
    500
}
fn half() -> f64 {
    0.5
}

fn bad(path: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: path.into(),
        message: message.into(),
    }
}

impl PowerControlSpec {
    /// The peak (W).
    pub fn peak_w(&self) -> f64 {
        match *self {
            PowerControlSpec::Credits { peak_w, .. }
            | PowerControlSpec::Powerherd { peak_w, .. } => peak_w,
        }
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let p = self.peak_w();
        if !(p.is_finite() && p > 0.0 && p <= 1e6) {
            return Err(bad(
                "power_control.peak_w",
                "a power above 0 W, at most 10^6",
            ));
        }
        match *self {
            PowerControlSpec::Credits {
                real_time_share,
                window,
                hop_cycles,
                ..
            } => {
                if real_time_share.is_some_and(|s| !(0.0..=1.0).contains(&s)) {
                    return Err(bad(
                        "power_control.real_time_share",
                        "a fraction of the peak, 0 to 1",
                    ));
                }
                if window.is_some_and(|w| !(1..=10_000_000).contains(&w)) {
                    return Err(bad("power_control.window", "1 to 10000000 cycles"));
                }
                if hop_cycles.is_some_and(|s| !(1..=1000).contains(&s)) {
                    return Err(bad("power_control.hop_cycles", "1 to 1000 cycles"));
                }
            }
            PowerControlSpec::Powerherd { window, share, .. } => {
                if !(1..=10_000_000).contains(&window) {
                    return Err(bad("power_control.window", "1 to 10000000 cycles"));
                }
                if !(share.is_finite() && (0.0..=1.0).contains(&share)) {
                    return Err(bad("power_control.share", "a fraction, 0 to 1"));
                }
            }
        }
        Ok(())
    }
}

/// Table 1 and the sampling period (`[power]`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnergySpec {
    /// Buffer read, per flit (pJ; Table 1: 31.125).
    #[serde(default = "read_pj")]
    pub buffer_read_pj: f64,
    /// Buffer write, per flit (pJ; 27.075).
    #[serde(default = "write_pj")]
    pub buffer_write_pj: f64,
    /// Output arbitration, per flit (pJ; 6.10086).
    #[serde(default = "arb_pj")]
    pub arbitration_pj: f64,
    /// Crossbar, per flit (pJ; 68.475).
    #[serde(default = "xbar_pj")]
    pub crossbar_pj: f64,
    /// Link, per bit (pJ; 10.21 at 2.5 Gbit/s).
    #[serde(default = "link_pj")]
    pub link_pj_per_bit: f64,
    /// An HCA's energy per flit it sends (pJ; the paper gives no number: default 0).
    #[serde(default)]
    pub hca_pj_per_flit: f64,
    /// Cycles per power sample (default 500, Fig 10's).
    #[serde(default = "sample")]
    pub sample_cycles: u64,
}

fn read_pj() -> f64 {
    31.125
}
fn write_pj() -> f64 {
    27.075
}
fn arb_pj() -> f64 {
    6.10086
}
fn xbar_pj() -> f64 {
    68.475
}
fn link_pj() -> f64 {
    10.21
}
fn sample() -> u64 {
    500
}

impl Default for EnergySpec {
    fn default() -> Self {
        EnergySpec {
            buffer_read_pj: read_pj(),
            buffer_write_pj: write_pj(),
            arbitration_pj: arb_pj(),
            crossbar_pj: xbar_pj(),
            link_pj_per_bit: link_pj(),
            hca_pj_per_flit: 0.0,
            sample_cycles: sample(),
        }
    }
}

impl EnergySpec {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (k, v) in [
            ("buffer_read_pj", self.buffer_read_pj),
            ("buffer_write_pj", self.buffer_write_pj),
            ("arbitration_pj", self.arbitration_pj),
            ("crossbar_pj", self.crossbar_pj),
            ("link_pj_per_bit", self.link_pj_per_bit),
            ("hca_pj_per_flit", self.hca_pj_per_flit),
        ] {
            if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
                return Err(ConfigError {
                    path: format!("power.{k}"),
                    message: "a non-negative energy (pJ), at most 10^6".into(),
                });
            }
        }
        if !(1..=10_000_000).contains(&self.sample_cycles) {
            return Err(ConfigError {
                path: "power.sample_cycles".into(),
                message: "1 to 10000000 cycles".into(),
            });
        }
        Ok(())
    }

    /// E_router: one flit through one router (pJ).
    pub fn router_flit_pj(&self) -> f64 {
        self.buffer_write_pj + self.buffer_read_pj + self.arbitration_pj + self.crossbar_pj
    }

    /// E_link: one flit of `bits` over one link (pJ).
    pub fn link_flit_pj(&self, bits: u32) -> f64 {
        self.link_pj_per_bit * bits as f64
    }
}

/// §5: E_packet = (E_router·(D + 1) + E_link·D)·N — the energy of an N-flit packet over
/// D hops (D links between D + 1 routers), in the units of the energies.
pub fn e_packet(e_router: f64, e_link: f64, d: u32, n: u32) -> f64 {
    (e_router * (d as f64 + 1.0) + e_link * d as f64) * n as f64
}

/// §5: L_packet = ((D + 1)·S − 1) + N + W_HCA — cycles from a packet's departure to its
/// arrival, S the cycles of one router and link, W_HCA its queueing in the HCA.
pub fn l_packet(d: u32, s: u64, n: u32, w_hca: u64) -> u64 {
    ((d as u64 + 1) * s).saturating_sub(1) + n as u64 + w_hca
}

/// What a flit costs in this model (pJ): through a router with its output link, and
/// the extra of leaving an HCA (its link into the router and the HCA's own energy).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlitEnergy {
    /// E_router + E_link.
    pub hop: f64,
    /// E_link + E_HCA.
    pub injection: f64,
    /// E_router alone, and E_link alone (the paper's terms).
    pub router: f64,
    /// E_link.
    pub link: f64,
}

impl FlitEnergy {
    /// From the energy model, for flits of `bits`.
    pub fn new(e: &EnergySpec, bits: u32) -> FlitEnergy {
        let router = e.router_flit_pj();
        let link = e.link_flit_pj(bits);
        FlitEnergy {
            hop: router + link,
            injection: link + e.hca_pj_per_flit,
            router,
            link,
        }
    }

    /// E_packet of this model: §5's (E_router·(D + 1) + E_link·D)·N plus the HCA links
    /// at both ends and the source HCA's energy, N·(2·E_link + E_HCA) (pJ).
    pub fn packet(&self, d: u32, n: u32) -> f64 {
        // injection + link: the two HCA links and the HCA.
        e_packet(self.router, self.link, d, n) + n as f64 * (self.injection + self.link)
    }
}

/// What an HCA's best-effort energy budget is made of (§5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BeParams {
    /// P_BE (W).
    pub p_be: f64,
    /// T (cycles; default by `restore`).
    pub window: Option<u64>,
    /// How spent budget comes back.
    pub restore: Restore,
    /// A cycle (s).
    pub cycle_s: f64,
    /// S, a header's cycles per router and link.
    pub hop_cycles: u64,
    /// N, flits per packet.
    pub packet_flits: u32,
    /// The power samples' period (cycles).
    pub sample_cycles: u64,
    /// Bytes per flit.
    pub flit_bytes: u64,
}

/// Peak power control's best-effort budget (§5): an HCA's E_BE = P_BE/n·T in pJ for
/// P_BE W over `fab`'s n HCAs and T cycles —
/// by default `sample_cycles` (the power samples' period) when the budget is granted
/// per period or refills, and with the paper's restore after
/// L_packet the least T whose budget holds the dearest packet (N = `packet_flits`
/// flits over the longest path). Refused (at `power_control.window`) when one
/// packet's energy exceeds E_BE: that packet could never leave. Returns E_BE and T.
pub fn be_budget(
    fab: &crate::flit::topology::Fabric,
    fe: &FlitEnergy,
    p: &BeParams,
) -> Result<(f64, u64), ConfigError> {
    let n = fab.nodes;
    let mut dearest = 0.0f64;
    for s in 0..n {
        for d in (0..n).filter(|&d| d != s) {
            let dd = fab.routers_on_path(s, d).saturating_sub(1);
            dearest = dearest.max(fe.packet(dd, p.packet_flits));
        }
    }
    let p_be = p.p_be;
    let per_cycle = p_be / n.max(1) as f64 * p.cycle_s * 1e12;
    let t = p.window.unwrap_or(match p.restore {
        Restore::Refill | Restore::Period => p.sample_cycles,
        Restore::AfterLPacket if per_cycle > 0.0 => {
            (dearest / per_cycle).ceil().clamp(1.0, 1e7) as u64
        }
        Restore::AfterLPacket => 1,
    });
    let budget = per_cycle * t as f64;
    if p_be > 0.0 && budget < dearest * (1.0 - 1e-12) {
        return Err(ConfigError {
            path: "power_control.window".into(),
            message: format!(
                "an HCA's best-effort energy budget E_BE ({budget:.0} pJ over {t} cycles) is below one packet's energy ({dearest:.0} pJ): raise peak_w or window"
            ),
        });
    }
    Ok((budget, t))
}

/// The network's power, sampled.
#[derive(Debug, Clone)]
pub struct PowerMeter {
    spec: EnergySpec,
    router_pj: f64,
    link_pj: f64,
    cycle_s: f64,
    from: u64,
    until: u64,
    last: Option<(u64, u64, u64)>,
    /// (cycle at the sample's end, watts) of every sample ending in the window.
    pub samples: Vec<(u64, f64)>,
    /// The routers' and links' share of each sample (watts).
    fabric: Vec<f64>,
}

/// What the meter measured.
#[derive(Debug, Clone, Serialize)]
pub struct PowerSummary {
    /// Mean power over the samples (W).
    pub mean_w: f64,
    /// Highest sample (W).
    pub max_w: f64,
    /// Samples taken in the measurement window.
    pub samples: usize,
    /// Cycles per sample.
    pub sample_cycles: u64,
    /// Every sample: (cycle at its end, W).
    pub trace: Vec<(u64, f64)>,
    /// The routers and links alone (Table 1's energies, without the HCAs' fitted
    /// energy per flit sent): mean over the samples (W).
    pub fabric_mean_w: f64,
    /// The routers and links alone: highest sample (W).
    pub fabric_max_w: f64,
}

impl PowerMeter {
    /// A meter of `spec` for flits of `flit_bits`, cycles of `cycle_s` seconds,
    /// keeping the samples that end in `[from, until]`.
    pub fn new(
        spec: EnergySpec,
        flit_bits: u32,
        cycle_s: f64,
        from: u64,
        until: u64,
    ) -> PowerMeter {
        PowerMeter {
            router_pj: spec.router_flit_pj(),
            link_pj: spec.link_flit_pj(flit_bits),
            spec,
            cycle_s,
            from,
            until,
            last: None,
            samples: Vec::new(),
            fabric: Vec::new(),
        }
    }

    /// Cycles per sample.
    pub fn period(&self) -> u64 {
        self.spec.sample_cycles
    }

    /// At cycle `now` the HCAs have sent `injected` flits into routers and the routers
    /// `hops` flits through their crossbars, since the start.
    pub fn sample(&mut self, now: u64, injected: u64, hops: u64) {
        if let Some((t0, i0, h0)) = self.last {
            if now > t0 && now > self.from && now <= self.until {
                let fabric = (hops - h0) as f64 * (self.router_pj + self.link_pj)
                    + (injected - i0) as f64 * self.link_pj;
                let pj = fabric + (injected - i0) as f64 * self.spec.hca_pj_per_flit;
                let to_w = 1e-12 / ((now - t0) as f64 * self.cycle_s);
                self.samples.push((now, pj * to_w));
                self.fabric.push(fabric * to_w);
            }
        }
        self.last = Some((now, injected, hops));
    }

    /// Mean and highest sample.
    pub fn summary(&self) -> PowerSummary {
        let n = self.samples.len();
        PowerSummary {
            mean_w: if n == 0 {
                0.0
            } else {
                self.samples.iter().map(|s| s.1).sum::<f64>() / n as f64
            },
            max_w: self.samples.iter().map(|s| s.1).fold(0.0, f64::max),
            samples: n,
            sample_cycles: self.spec.sample_cycles,
            trace: self.samples.clone(),
            fabric_mean_w: if n == 0 {
                0.0
            } else {
                self.fabric.iter().sum::<f64>() / n as f64
            },
            fabric_max_w: self.fabric.iter().copied().fold(0.0, f64::max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_1_gives_the_router_and_link_energies_per_flit() {
        let e = EnergySpec::default();
        assert!((e.router_flit_pj() - 132.77586).abs() < 1e-9);
        assert!((e.link_flit_pj(128) - 1306.88).abs() < 1e-9);
        assert!(e.validate().is_ok());
        let bad = EnergySpec {
            crossbar_pj: -1.0,
            ..e
        };
        assert_eq!(bad.validate().unwrap_err().path, "power.crossbar_pj");
    }

    #[test]
    fn packet_energy_and_time_follow_section_5() {
        // Two hops: three routers, two links, 40 flits.
        assert_eq!(e_packet(2.0, 5.0, 2, 40), (2.0 * 3.0 + 5.0 * 2.0) * 40.0);
        // Zero hops (source and destination on one router): one router, no link.
        assert_eq!(e_packet(2.0, 5.0, 0, 10), 20.0);
        // D = 2, S = 5 (Fig 1's five stages), N = 40, W_HCA = 7: 3·5 − 1 + 40 + 7.
        assert_eq!(l_packet(2, 5, 40, 7), 61);
        assert_eq!(l_packet(0, 1, 1, 0), 1);
    }

    #[test]
    fn samples_turn_flit_counts_into_watts() {
        let e = EnergySpec {
            hca_pj_per_flit: 500.0,
            ..EnergySpec::default()
        };
        // Cycles of 1 ns, samples in (100, 300].
        let mut m = PowerMeter::new(e, 128, 1e-9, 100, 300);
        m.sample(0, 0, 0);
        m.sample(100, 50, 100); // ends at the window's start: not kept
                                // 100 cycles: 10 flits injected, 20 crossings.
        m.sample(200, 60, 120);
        m.sample(300, 60, 120);
        m.sample(400, 90, 200); // after the window
        let flits = 20.0 * (e.router_flit_pj() + 1306.88) + 10.0 * (1306.88 + 500.0);
        let w = flits * 1e-12 / 100e-9;
        assert_eq!(m.samples.len(), 2);
        assert!((m.samples[0].1 - w).abs() < 1e-9);
        assert_eq!(m.samples[1].1, 0.0);
        let s = m.summary();
        assert!((s.max_w - w).abs() < 1e-9);
        assert!((s.mean_w - w / 2.0).abs() < 1e-9);
        // The routers and links alone: the HCA's 500 pJ per flit left out.
        let fabric = (20.0 * (e.router_flit_pj() + 1306.88) + 10.0 * 1306.88) * 1e-12 / 100e-9;
        assert!((s.fabric_max_w - fabric).abs() < 1e-9);
        assert!((s.fabric_mean_w - fabric / 2.0).abs() < 1e-9);
    }
}
