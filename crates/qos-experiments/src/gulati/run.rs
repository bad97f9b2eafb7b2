//! Runs a validated [`Scenario`]: builds the model runs its kind calls for, measures
//! like the thesis's benchmarks (§5.1), and compares with the published values.
//! Returns [`Results`]: checks, figures (thesis axes) and notes, ready for the report.

use std::sync::Arc;

use qos_core::topology::{NodeId, RateParams};
use qos_core::units::{Bandwidth, Bytes, Duration, Time};
use serde::Serialize;

use qos_sim::myrinet::{Api, Cluster, Firmware, FlowSpec, Outcome, Rate, Setup, Workload};

use super::scenario::{Defaults, Kind, Metric, Scenario, T_TICKS};
use crate::check::expect::MetricName;
use crate::check::{Check, Comparison, MetricId, Published, Role, Source, Unit};
pub use crate::error::RunError;
use crate::report::{Figure, Scale, Series, Style};

/// How long to run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Reduced sizes (tests).
    pub quick: bool,
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// T and Bmax of the model, measured beforehand ([`measure_model`]), for the
    /// scenarios run under the bandwidth manager; measured on demand when absent.
    pub model: Option<ModelParams>,
}

/// T and Bmax as measured on the model (thesis §5.3): what the simulated bandwidth
/// manager computes IDTs from, as the thesis's manager used the measured values.
///
/// T is the time per packet at Bmax (one MTU-sized packet / Bmax), the thesis's
/// definition in §3.2.2 ("service them at most once in every T time units. This T
/// corresponds to the peak achievable bandwidth of an uncontended flow, Bmax"), and the
/// one the runtime's calibration uses: then T·Bmax is a packet and an IDT of
/// T·Bmax/B paces a flow at B. The knee of the IDT sweep (§5.3's reading: the largest
/// IDT still at Bmax) is measured beside it; it is what the thesis's 96 ticks is
/// compared with. (The thesis's own pair, 96 ticks and 81.8 MB/s, has T·Bmax = 3,926
/// B, 4 % below its 4 KB packet, so its manager's IDTs paced flows 4 % above their
/// reservations.)
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModelParams {
    /// One packet's time at Bmax.
    pub t: Duration,
    /// The same in LANai RTC ticks.
    pub t_ticks: f64,
    /// The knee of the IDT sweep ([`qos_core::calibrate::knee`]), in ticks.
    pub knee_ticks: f64,
    /// The bandwidth of one unregulated flow of 64 KB messages.
    pub bmax: Bandwidth,
}

/// What one scenario produced.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// Scenario name.
    pub name: String,
    /// Title.
    pub title: String,
    /// Thesis figure(s).
    pub figure: String,
    /// Comparisons.
    pub checks: Vec<Check>,
    /// Plots.
    pub figures: Vec<Figure>,
    /// Simulated events (cost).
    pub events: u64,
    /// T and Bmax the simulated manager used (scenarios under the manager).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelParams>,
}

pub(super) struct Ctx<'a> {
    pub(super) s: &'a Scenario,
    pub(super) opt: Options,
    pub(super) out: Results,
}

/// Runs `s`.
pub fn execute(s: &Scenario, opt: Options) -> Result<Results, RunError> {
    let mut c = Ctx {
        s,
        opt,
        out: Results {
            name: s.file.name.clone(),
            title: s.file.title.clone(),
            figure: s.file.figure.clone(),
            checks: Vec::new(),
            figures: Vec::new(),
            events: 0,
            model: None,
        },
    };
    match s.file.kind {
        Kind::Sharing => c.sharing()?,
        Kind::IdtSweep => c.idt_sweep(Api::Gm)?,
        Kind::ReceiveVsSend => c.receive_vs_send()?,
        Kind::Overhead => c.overhead()?,
        Kind::Mpi => {
            c.idt_sweep(Api::Mpi)?;
            c.sharing()?;
        }
        Kind::Timeline => c.timeline()?,
        Kind::Contention => c.contention()?,
    }
    Ok(c.out)
}

/// IDTs of the calibration sweep, in units of 2 ticks: every 2 ticks from 64 to 160
/// ticks across the knee (the thesis's T is 96), so that the interpolated knee resolves
/// far better than 10 %.
const CALIBRATION_TICKS: std::ops::RangeInclusive<u64> = 32..=80;

/// Measures T and Bmax on the model as thesis §5.3 does: one flow of 64 KB messages
/// between the cluster's first two hosts, unregulated for Bmax, then IDTs of 64 to 160
/// ticks for the knee. The same calibration and seed give the same values.
pub fn measure_model(s: &Scenario, opt: Options) -> Result<ModelParams, RunError> {
    let mut c = Ctx {
        s,
        opt,
        out: Results {
            name: s.file.name.clone(),
            title: String::new(),
            figure: String::new(),
            checks: Vec::new(),
            figures: Vec::new(),
            events: 0,
            model: None,
        },
    };
    let tick = c.tick();
    let size = Bytes::kib(64);
    let ends = (NodeId(0), NodeId(1));
    let bmax = c.pump_bw_between(Duration::ZERO, size, ends)?;
    let mut pts = vec![(0.0, bmax)];
    for k in CALIBRATION_TICKS {
        let idt = tick * (2 * k);
        pts.push(((2 * k) as f64, c.pump_bw_between(idt, size, ends)?));
    }
    let knee = qos_core::calibrate::knee(&pts, bmax).ok_or_else(|| RunError::NoKnee {
        scenario: s.file.name.clone(),
    })?;
    let packet = s.calibration.packet.mtu.get() as f64;
    let t = Duration::from_ps((packet / (bmax * 1e6) * 1e12).round() as u64);
    Ok(ModelParams {
        t,
        t_ticks: ticks(t, tick),
        knee_ticks: knee,
        bmax: Bandwidth::from_mb_per_sec(bmax),
    })
}

pub(super) fn ticks(d: Duration, tick: Duration) -> f64 {
    d.in_ticks_f64(tick)
}

impl Ctx<'_> {
    pub(super) fn tick(&self) -> Duration {
        self.s.calibration.clock.tick
    }
    pub(super) fn seed(&self) -> u64 {
        self.opt
            .seed
            .or(self.s.file.seed)
            .unwrap_or(crate::experiment::DEFAULT_SEED)
    }
    pub(super) fn duration(&self) -> (Time, Time) {
        let d = self.s.file.duration.unwrap_or(Defaults::DURATION);
        let w = self.s.file.warmup.unwrap_or(Defaults::WARMUP);
        let (d, w) = if self.opt.quick && self.s.file.kind != Kind::Timeline {
            (d / 4, w / 2)
        } else {
            (d, w)
        };
        (Time::ZERO + w, Time::ZERO + d.max(w + Duration::from_ms(1)))
    }
    fn messages(&self) -> u64 {
        let m = self.s.file.messages.unwrap_or(Defaults::MESSAGES);
        if self.opt.quick {
            (m / 5).max(8)
        } else {
            m
        }
    }

    /// T and Bmax for the manager: given, or measured on the model now.
    pub(super) fn model(&mut self) -> Result<ModelParams, RunError> {
        let m = match self.opt.model {
            Some(m) => m,
            None => measure_model(self.s, self.opt)?,
        };
        self.out.model = Some(m);
        Ok(m)
    }

    pub(super) fn run(
        &mut self,
        flows: Vec<FlowSpec>,
        firmware: Firmware,
        bin: Option<Duration>,
    ) -> Result<Outcome, RunError> {
        let topology = self.s.topology.clone();
        self.run_on(topology, flows, firmware, bin)
    }

    /// Runs `flows` on `topology` (the scenario's, or the same with measured T and Bmax
    /// for the manager).
    pub(super) fn run_on(
        &mut self,
        topology: Arc<qos_core::topology::Topology>,
        flows: Vec<FlowSpec>,
        firmware: Firmware,
        bin: Option<Duration>,
    ) -> Result<Outcome, RunError> {
        let (w0, end) = self.duration();
        let pump = flows
            .iter()
            .all(|f| !matches!(f.workload, Workload::Stream));
        let setup = Setup {
            topology,
            calibration: self.s.calibration,
            firmware,
            via: qos_sim::myrinet::nic::via::ViaCalibration::paper(),
            flows,
            control_latency: self
                .s
                .file
                .control_latency
                .unwrap_or(Defaults::CONTROL_LATENCY),
            window: (w0, end),
            timeline_bin: bin,
            until: if pump {
                Time::from_ps(u64::MAX / 2)
            } else {
                end
            },
            seed: self.seed(),
        };
        let cluster = Cluster::new(setup).map_err(|e| RunError::Model {
            scenario: self.s.file.name.clone(),
            why: e.to_string(),
        })?;
        let o = cluster.run();
        self.out.events += o.events;
        Ok(o)
    }

    /// The scenario's topology with the model's measured T and Bmax, for the manager.
    pub(super) fn calibrated_topology(
        &mut self,
    ) -> Result<Arc<qos_core::topology::Topology>, RunError> {
        let m = self.model()?;
        Ok(Arc::new(self.s.topology.with_rate(RateParams {
            t: m.t,
            bmax: m.bmax,
        })))
    }

    pub(super) fn flow(&self, i: usize, rate: Rate, workload: Workload, api: Api) -> FlowSpec {
        let (src, dst) = self
            .s
            .endpoints
            .get(i)
            .copied()
            .unwrap_or((NodeId(0), NodeId(1)));
        let name = self
            .s
            .file
            .flow
            .get(i)
            .map_or_else(|| format!("flow {}", i + 1), |f| f.name.clone());
        FlowSpec {
            name,
            src,
            dst,
            message: self.s.message(),
            rate,
            workload,
            api,
            start: Time::ZERO,
            stop: None,
        }
    }

    pub(super) fn push(&mut self, c: Check) {
        self.out.checks.push(c);
    }

    /// A metric id of this scenario.
    pub(super) fn id(&self, metric: &str) -> MetricId {
        MetricId::new(self.s.file.name.clone(), metric)
    }

    /// Checks of `[[expect]]` for `metric`, with the value computed by `value` (and,
    /// for a comparison, its two sides).
    pub(super) fn expects(
        &mut self,
        metric: Metric,
        mut value: impl FnMut(&mut Self, usize) -> Option<(f64, Option<Comparison>)>,
    ) {
        let n = self.s.file.expect.len();
        for i in 0..n {
            let e = self.s.file.expect[i].clone();
            if e.metric() != metric {
                continue;
            }
            let Some((v, sides)) = value(self, i) else {
                continue;
            };
            let mut id = self.id(metric.name());
            if let Some(at) = self.s.expect_at[i] {
                id = id.at(format!("{:.0} ticks", ticks(at, self.tick())));
            }
            if let Some(f) = &e.flow {
                id = id.flow(f.get_ref().clone());
            }
            if let (Some(a), Some(b)) = (e.from, e.until) {
                id = id.window(format!("{a}-{b}"));
            }
            let c = e.check(id, v, sides);
            self.push(c);
        }
    }

    fn sharing(&mut self) -> Result<(), RunError> {
        let api = self.s.api();
        let mut fig = Figure::new(
            format!("{}-sharing", self.s.file.name),
            format!("Fig {}: {}", self.s.file.figure, self.s.file.title),
            "IDTs of the flows",
            "Bandwidth (MB/s)",
        )
        .with_categories(self.s.file.case.iter().map(|c| c.label.clone()));
        let nflows = self.s.file.flow.len();
        let mut sim_series: Vec<Vec<(f64, f64)>> = vec![Vec::new(); nflows];
        let mut pub_series: Vec<Vec<(f64, f64)>> = vec![Vec::new(); nflows];
        let cases = self.s.file.case.clone();
        let names: Vec<String> = self.s.file.flow.iter().map(|f| f.name.clone()).collect();
        for (ci, case) in cases.iter().enumerate() {
            let idts = self.s.case_idts[ci].clone();
            let flows = (0..nflows)
                .map(|i| self.flow(i, Rate::Idt(idts[i]), Workload::Stream, api))
                .collect();
            let o = self.run(flows, self.s.firmware(), None)?;
            let bw: Vec<f64> = o.flows.iter().map(|f| f.window_mb_s).collect();
            let role = case.role.unwrap_or(Role::Prediction);
            for i in 0..nflows {
                sim_series[i].push(((ci + 1) as f64, bw[i]));
                let (Some(&p), Some(src)) = (case.published.get(i), &case.source) else {
                    continue;
                };
                pub_series[i].push(((ci + 1) as f64, p));
                let id = self.id("bandwidth").case(&case.label).flow(&names[i]);
                let mut c = Check::value(
                    id,
                    Unit::MbPerSec,
                    role,
                    Unit::MbPerSec.bar(),
                    Published {
                        value: p,
                        source: src.clone(),
                    },
                    bw[i],
                );
                if let Some(n) = &case.note {
                    c = c.with_note(n.clone());
                }
                self.push(c);
            }
            let chosen: Vec<usize> = match &case.ratio_of {
                Some(list) => list
                    .iter()
                    .filter_map(|n| names.iter().position(|x| x == n.get_ref()))
                    .collect(),
                None => (0..nflows).collect(),
            };
            if let Some((&r, rest)) = chosen.split_first() {
                for &i in rest {
                    let (published, note) = sharing_ratio(case, &idts, &names, i, r);
                    let id = self
                        .id("ratio")
                        .case(&case.label)
                        .flow(&names[i])
                        .reference(&names[r]);
                    let sim = bw[i] / bw[r].max(1e-9);
                    // Two flows of one case with equal IDTs share equally whatever the
                    // model: that ratio holds by construction.
                    let role = if idts[i] == idts[r] {
                        Role::Identity
                    } else {
                        Role::Prediction
                    };
                    let mut c =
                        Check::value(id, Unit::Ratio, role, Unit::Ratio.bar(), published, sim);
                    if let Some(n) = note {
                        c = c.with_note(n);
                    }
                    self.push(c);
                }
            }
        }
        for i in 0..nflows {
            let n = &names[i];
            fig.series.push(
                Series::new(format!("{n} measured"), sim_series[i].clone())
                    .with_style(Style::Scatter)
                    .in_group(n.clone()),
            );
            if !pub_series[i].is_empty() {
                fig.series.push(
                    Series::published(format!("{n} published"), pub_series[i].clone())
                        .in_group(n.clone()),
                );
            }
        }
        if !cases.is_empty() {
            self.out.figures.push(fig);
        }
        Ok(())
    }

    fn pump_messages(&self, size: Bytes) -> u64 {
        if size.get() >= 16384 {
            self.messages()
        } else {
            (self.messages() * 65536 / size.get().max(1)).min(if self.opt.quick {
                200
            } else {
                2000
            })
        }
    }

    fn pump_bw(
        &mut self,
        idt: Duration,
        api: Api,
        firmware: Firmware,
        size: Bytes,
    ) -> Result<f64, RunError> {
        let messages = self.pump_messages(size);
        let mut f = self.flow(0, Rate::Idt(idt), Workload::Pump { messages }, api);
        f.message = size;
        let o = self.run(vec![f], firmware, None)?;
        Ok(o.flows.first().and_then(|f| f.pump_mb_s).unwrap_or(0.0))
    }

    /// GM-level pump bandwidth between two given hosts (the model's calibration).
    fn pump_bw_between(
        &mut self,
        idt: Duration,
        size: Bytes,
        (src, dst): (NodeId, NodeId),
    ) -> Result<f64, RunError> {
        // The same length whatever the scenario and --quick: one calibration.
        let messages = 100;
        let mut f = self.flow(0, Rate::Idt(idt), Workload::Pump { messages }, Api::Gm);
        f.src = src;
        f.dst = dst;
        f.message = size;
        let o = self.run(vec![f], self.s.firmware(), None)?;
        Ok(o.flows.first().and_then(|f| f.pump_mb_s).unwrap_or(0.0))
    }

    fn idt_sweep(&mut self, api: Api) -> Result<(), RunError> {
        let tick = self.tick();
        let sweep = self.s.sweep.clone();
        let size = self.s.message();
        let mut gm = Vec::new();
        let mut mpi = Vec::new();
        for &idt in &sweep {
            let x = ticks(idt, tick);
            gm.push((x, self.pump_bw(idt, Api::Gm, self.s.firmware(), size)?));
            if api == Api::Mpi {
                mpi.push((x, self.pump_bw(idt, Api::Mpi, self.s.firmware(), size)?));
            }
        }
        let bmax = match gm.iter().find(|p| p.0 == 0.0) {
            Some(p) => p.1,
            None => self.pump_bw(Duration::ZERO, Api::Gm, self.s.firmware(), size)?,
        };
        let mut fig = Figure::new(
            format!("{}-idt", self.s.file.name),
            format!("Fig {}: {}", self.s.file.figure, self.s.file.title),
            "IDT (LANai RTC ticks, 0.5 us)",
            "Bandwidth (MB/s)",
        );
        fig.series
            .push(Series::new("GM level (simulated)", gm.clone()));
        if api == Api::Mpi {
            fig.series
                .push(Series::new("MPI level (simulated)", mpi.clone()));
        }
        let model: Vec<(f64, f64)> = gm
            .iter()
            .map(|p| {
                let v = if p.0 <= 0.0 {
                    bmax
                } else {
                    bmax.min(bmax * T_TICKS as f64 / p.0)
                };
                (p.0, v)
            })
            .collect();
        fig.series
            .push(Series::new("min(Bmax, T·Bmax/IDT), T = 96", model).with_style(Style::Line));
        self.out.figures.push(fig);
        self.expects(Metric::Bmax, |_, _| Some((bmax, None)));
        if let Some(knee) = qos_core::calibrate::knee(&gm, bmax) {
            self.expects(Metric::Knee, |_, _| Some((knee, None)));
        }
        let cap: Vec<f64> = mpi.iter().filter(|p| p.0 < 140.0).map(|p| p.1).collect();
        if !cap.is_empty() {
            let mean = cap.iter().sum::<f64>() / cap.len() as f64;
            self.expects(Metric::MpiCap, |_, _| Some((mean, None)));
        }
        Ok(())
    }

    fn receive_vs_send(&mut self) -> Result<(), RunError> {
        let sweep = self.s.sweep.clone();
        let mut out_pts = Vec::new();
        let mut sum_pts = Vec::new();
        let mut by_idt = Vec::new();
        for &idt in &sweep {
            let flows = vec![
                self.flow(0, Rate::Idt(idt), Workload::Stream, Api::Gm),
                self.flow(1, Rate::Idt(Duration::ZERO), Workload::Stream, Api::Gm),
            ];
            let o = self.run(flows, self.s.firmware(), None)?;
            let (i, out) = (o.flows[0].window_mb_s, o.flows[1].window_mb_s);
            out_pts.push((i, out));
            sum_pts.push((i, i + out));
            by_idt.push((idt, out));
        }
        let mut fig = Figure::new(
            format!("{}-out", self.s.file.name),
            format!("Fig {}: {}", self.s.file.figure, self.s.file.title),
            "Incoming flow bandwidth (MB/s)",
            "Bandwidth (MB/s)",
        );
        fig.series
            .push(Series::new("max outgoing (simulated)", out_pts));
        fig.series
            .push(Series::new("incoming + outgoing", sum_pts.clone()));
        // The figure's one point the text reads off (§5.4.3): 16.37 MB/s incoming
        // leaves approximately 65.0 MB/s.
        fig.series
            .push(Series::new("thesis (§5.4.3)", vec![(16.37, 65.0)]).with_style(Style::Scatter));
        self.out.figures.push(fig);
        self.expects(Metric::Outgoing, |c, i| {
            let at = c.s.expect_at[i]?;
            by_idt.iter().find(|p| p.0 == at).map(|p| (p.1, None))
        });
        // The sum at the highest incoming rate against the sum at the lowest.
        let by_rate = |hi: bool| {
            sum_pts
                .iter()
                .copied()
                .reduce(|a, b| if (b.0 > a.0) == hi { b } else { a })
        };
        if let (Some(hi), Some(lo)) = (by_rate(true), by_rate(false)) {
            self.expects(Metric::NetGain, |_, _| {
                Some((hi.1 / lo.1.max(1e-9), Some(Comparison::new(hi.1, lo.1))))
            });
        }
        Ok(())
    }

    fn overhead(&mut self) -> Result<(), RunError> {
        let sizes = self.s.file.sizes.clone();
        let mut lat = [Vec::new(), Vec::new()];
        let mut bw = [Vec::new(), Vec::new()];
        let iterations = self.s.file.iterations.unwrap_or(Defaults::ITERATIONS)
            / if self.opt.quick { 5 } else { 1 };
        for &size in &sizes {
            for (k, fw) in [Firmware::Gm, Firmware::RateControl]
                .into_iter()
                .enumerate()
            {
                let mut f = self.flow(
                    0,
                    Rate::Idt(Duration::ZERO),
                    Workload::PingPong {
                        iterations: iterations.max(2),
                    },
                    Api::Gm,
                );
                f.message = size;
                let o = self.run(vec![f], fw, None)?;
                let l = o.flows.first().and_then(|f| f.latency_us).unwrap_or(0.0);
                lat[k].push((size.get() as f64, 2.0 * l));
                let b = self.pump_bw(Duration::ZERO, Api::Gm, fw, size)?;
                bw[k].push((size.get() as f64, b));
            }
        }
        let n = sizes.len().max(1) as f64;
        let lat_over = lat[1]
            .iter()
            .zip(&lat[0])
            .map(|(r, g)| 100.0 * (r.1 - g.1) / g.1.max(1e-9))
            .sum::<f64>()
            / n;
        let losses: Vec<f64> = bw[1]
            .iter()
            .zip(&bw[0])
            .map(|(r, g)| 100.0 * (g.1 - r.1) / g.1.max(1e-9))
            .collect();
        let loss_avg = losses.iter().sum::<f64>() / n;
        let loss_worst = losses.iter().copied().fold(f64::MIN, f64::max);
        let fig_bw = Figure::new(
            format!("{}-bandwidth", self.s.file.name),
            "Fig 5.1: Effect of the Rate Control feature on bandwidth",
            "Message size (bytes)",
            "Bandwidth (MB/s)",
        )
        .with_series(Series::new("unmodified GM", bw[0].clone()))
        .with_series(Series::new("GM with rate control", bw[1].clone()))
        .with_x_scale(Scale::Log2);
        let fig_lat = Figure::new(
            format!("{}-latency", self.s.file.name),
            "Fig 5.2: Effect of the Rate Control feature on round-trip latency",
            "Message size (bytes)",
            "Round-trip latency (us)",
        )
        .with_series(Series::new("unmodified GM", lat[0].clone()))
        .with_series(Series::new("GM with rate control", lat[1].clone()))
        .with_x_scale(Scale::Log2);
        self.out.figures.push(fig_bw);
        self.out.figures.push(fig_lat);
        self.expects(Metric::LatencyOverheadAvg, |_, _| Some((lat_over, None)));
        self.expects(Metric::BandwidthLossAvg, |_, _| Some((loss_avg, None)));
        self.expects(Metric::BandwidthLossWorst, |_, _| Some((loss_worst, None)));
        let mtu = self.s.calibration.packet.mtu.get();
        let measured = segmentation_note(&sizes, &losses, mtu);
        for c in self.out.checks.iter_mut() {
            if c.id.metric.starts_with("bandwidth-loss") {
                c.note = Some(match c.note.take() {
                    Some(n) => format!("{measured} {n}"),
                    None => measured.clone(),
                });
            }
        }
        Ok(())
    }
}

/// What the bandwidth losses of §5.2 over `sizes` come from, measured: the largest and
/// the smallest loss with their sizes, and the mean loss of the sizes the two MCPs cut
/// into different packets (GM's equal chunks against rate control's full-MTU packets)
/// beside that of the sizes both cut the same way, where only rate control's
/// bookkeeping differs.
pub fn segmentation_note(sizes: &[Bytes], losses: &[f64], mtu: u64) -> String {
    use qos_sim::myrinet::calibration::Segmentation;
    let (mut cut_apart, mut cut_alike) = (Vec::new(), Vec::new());
    for (size, loss) in sizes.iter().zip(losses) {
        let b = size.get();
        if Segmentation::EqualChunks.cut(b, mtu) == Segmentation::FullMtu.cut(b, mtu) {
            cut_alike.push(*loss);
        } else {
            cut_apart.push(*loss);
        }
    }
    let mean = |v: &[f64]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            format!("{:.2} %", v.iter().sum::<f64>() / v.len() as f64)
        }
    };
    let pick = |better: fn(f64, f64) -> bool| {
        sizes
            .iter()
            .zip(losses)
            .fold(None::<(u64, f64)>, |acc, (s, &l)| match acc {
                Some((_, m)) if !better(l, m) => acc,
                _ => Some((s.get(), l)),
            })
    };
    let worst = pick(|a, b| a > b).unwrap_or((0, 0.0));
    let least = pick(|a, b| a < b).unwrap_or((0, 0.0));
    format!(
        "Measured on these {} sizes: worst loss {:.2} % at {} B, least {:.2} % at {} B (below \
         zero: rate control faster); \
         the {} sizes the two MCPs cut into different packets (GM's equal chunks, rate \
         control's full {mtu} B packets) lose {} on average, the {} cut the same way {}.",
        sizes.len(),
        worst.1,
        worst.0,
        least.1,
        least.0,
        cut_apart.len(),
        mean(&cut_apart),
        cut_alike.len(),
        mean(&cut_alike),
    )
}

/// The published ratio of flow `i` to flow `r` in a sharing case: the inverse ratio of
/// their IDTs, which the thesis states its results follow ("in the ratio of 1/2T : 1/4T
/// : 1/4T, or 2 : 1 : 1", §5.4.1; §5.4.2, §5.5.2). With the note, the ratio of the
/// bandwidths the thesis measured when it states them (20.5 / 39.81 = 0.515), which
/// the per-flow bandwidth checks compare with.
pub fn sharing_ratio(
    case: &super::scenario::CaseDef,
    idts: &[Duration],
    names: &[String],
    i: usize,
    r: usize,
) -> (Published, Option<String>) {
    let ideal = idts[r].as_ps() as f64 / idts[i].as_ps().max(1) as f64;
    let published = Published {
        value: ideal,
        source: Source::Stated(
            "§5.4, §5.5.2: the bandwidths are in the inverse ratio of the IDTs (1/IDT)".into(),
        ),
    };
    let note = match (case.published.get(i), case.published.get(r)) {
        (Some(&a), Some(&b)) if b > 0.0 => Some(format!(
            "the thesis's measured bandwidths give {a} / {b} = {:.3} for {} / {} ({:+.1} % from 1/IDT)",
            a / b,
            names[i],
            names[r],
            100.0 * (a / b / ideal - 1.0)
        )),
        _ => None,
    };
    (published, note)
}
