//! Runs a validated [`Scenario`]: builds the model runs its kind calls for, measures
//! like the thesis's benchmarks (§5.1), and compares with the published values.
//! Returns [`Results`]: checks, figures (thesis axes) and notes, ready for the report.

use qos_core::topology::NodeId;
use qos_core::units::{Bytes, Duration, Time};
use serde::Serialize;

use super::{Kind, Mode, Scenario, T_TICKS};
use crate::myrinet::{Api, Cluster, Firmware, FlowSpec, Outcome, Rate, Setup, Workload};
use crate::report::{Figure, Scale, Series, Style};

/// Metric names each kind understands in `[[expect]]`.
pub fn metrics(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Sharing => &[],
        Kind::IdtSweep => &["bmax", "knee"],
        Kind::ReceiveVsSend => &["outgoing"],
        Kind::Overhead => &[
            "latency-overhead-avg",
            "bandwidth-loss-avg",
            "bandwidth-loss-worst",
        ],
        Kind::Mpi => &["mpi-cap"],
        Kind::Timeline => &["rate", "dispatch-frequency"],
        Kind::Contention => &["b-over-a-unregulated", "b-over-a-regulated", "b-regulated"],
    }
}

/// How long to run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Reduced sizes (tests).
    pub quick: bool,
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
}

/// One compared value.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Scenario name.
    pub experiment: String,
    /// What is compared.
    pub metric: String,
    /// Unit of both values.
    pub unit: String,
    /// The thesis's value.
    pub published: f64,
    /// The model's value.
    pub simulated: f64,
    /// (simulated − published) / published.
    pub deviation: f64,
    /// Allowed relative deviation (or 0 for an upper bound).
    pub tolerance: f64,
    /// "within" or "at-most".
    pub mode: String,
    /// Whether it passes.
    pub ok: bool,
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
}

pub(super) struct Ctx<'a> {
    pub(super) s: &'a Scenario,
    pub(super) opt: Options,
    pub(super) out: Results,
}

/// Runs `s`.
pub fn execute(s: &Scenario, opt: Options) -> Results {
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
        },
    };
    match s.file.kind {
        Kind::Sharing => c.sharing(),
        Kind::IdtSweep => c.idt_sweep(Api::Gm),
        Kind::ReceiveVsSend => c.receive_vs_send(),
        Kind::Overhead => c.overhead(),
        Kind::Mpi => {
            c.idt_sweep(Api::Mpi);
            c.sharing();
        }
        Kind::Timeline => c.timeline(),
        Kind::Contention => c.contention(),
    }
    c.out
}

pub(super) fn ticks(d: Duration, tick: Duration) -> f64 {
    d.in_ticks_f64(tick)
}

impl Ctx<'_> {
    pub(super) fn tick(&self) -> Duration {
        self.s.calibration.clock.tick
    }
    pub(super) fn seed(&self) -> u64 {
        self.opt.seed.or(self.s.file.seed).unwrap_or(1)
    }
    pub(super) fn duration(&self) -> (Time, Time) {
        let d = self.s.file.duration.unwrap_or(Duration::from_ms(60));
        let w = self.s.file.warmup.unwrap_or(Duration::from_ms(5));
        let (d, w) = if self.opt.quick && self.s.file.kind != Kind::Timeline {
            (d / 4, w / 2)
        } else {
            (d, w)
        };
        (Time::ZERO + w, Time::ZERO + d.max(w + Duration::from_ms(1)))
    }
    fn messages(&self) -> u64 {
        let m = self.s.file.messages.unwrap_or(100);
        if self.opt.quick {
            (m / 5).max(8)
        } else {
            m
        }
    }

    pub(super) fn run(
        &mut self,
        flows: Vec<FlowSpec>,
        firmware: Firmware,
        bin: Option<Duration>,
    ) -> Outcome {
        let (w0, end) = self.duration();
        let pump = flows
            .iter()
            .all(|f| !matches!(f.workload, Workload::Stream));
        let setup = Setup {
            topology: self.s.topology.clone(),
            calibration: self.s.calibration,
            firmware,
            flows,
            control_latency: self
                .s
                .file
                .control_latency
                .unwrap_or(Duration::from_us(100)),
            window: (w0, end),
            timeline_bin: bin,
            until: if pump {
                Time::from_ps(u64::MAX / 2)
            } else {
                end
            },
            seed: self.seed(),
        };
        match Cluster::new(setup) {
            Ok(c) => {
                let o = c.run();
                self.out.events += o.events;
                o
            }
            // Routes were checked when the scenario was loaded.
            Err(_) => Outcome::default(),
        }
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

    pub(super) fn check(
        &mut self,
        metric: String,
        unit: &str,
        published: f64,
        simulated: f64,
        tol: f64,
        mode: Mode,
    ) {
        let deviation = if published != 0.0 {
            (simulated - published) / published
        } else {
            simulated
        };
        let ok = match mode {
            Mode::Within => deviation.abs() <= tol + 1e-12,
            Mode::AtMost => simulated <= published,
        };
        self.out.checks.push(Check {
            experiment: self.s.file.name.clone(),
            metric,
            unit: unit.to_string(),
            published,
            simulated,
            deviation,
            tolerance: if mode == Mode::AtMost { 0.0 } else { tol },
            mode: match mode {
                Mode::Within => "within",
                Mode::AtMost => "at-most",
            }
            .into(),
            ok,
        });
    }

    /// Checks of `[[expect]]` for metric `name`, with the value computed by `value`.
    pub(super) fn expects(
        &mut self,
        name: &str,
        unit: &str,
        mut value: impl FnMut(&mut Self, usize) -> Option<f64>,
    ) {
        let n = self.s.file.expect.len();
        for i in 0..n {
            let e = self.s.file.expect[i].clone();
            if e.metric.get_ref() != name {
                continue;
            }
            if let Some(v) = value(self, i) {
                let label = match (&self.s.expect_at[i], &e.flow) {
                    (Some(at), _) => format!("{name} at IDT {:.0} ticks", ticks(*at, self.tick())),
                    (None, Some(f)) => format!(
                        "{name} of {} in {}-{}",
                        f.get_ref(),
                        e.from.unwrap_or_default(),
                        e.until.unwrap_or_default()
                    ),
                    _ => name.to_string(),
                };
                self.check(
                    label,
                    unit,
                    e.published,
                    v,
                    e.tolerance.unwrap_or(0.10),
                    e.mode,
                );
            }
        }
    }

    fn sharing(&mut self) {
        let api = self.s.api();
        let mut fig = Figure::new(
            format!("{}-sharing", self.s.file.name),
            format!("Fig {}: {}", self.s.file.figure, self.s.file.title),
            "case (IDTs)",
            "Bandwidth (MB/s)",
        );
        let nflows = self.s.file.flow.len();
        let mut sim_series: Vec<Vec<(f64, f64)>> = vec![Vec::new(); nflows];
        let mut pub_series: Vec<Vec<(f64, f64)>> = vec![Vec::new(); nflows];
        let cases = self.s.file.case.clone();
        for (ci, case) in cases.iter().enumerate() {
            let idts = self.s.case_idts[ci].clone();
            let flows = (0..nflows)
                .map(|i| self.flow(i, Rate::Idt(idts[i]), Workload::Stream, api))
                .collect();
            let o = self.run(flows, self.s.firmware(), None);
            let bw: Vec<f64> = o.flows.iter().map(|f| f.window_mb_s).collect();
            for i in 0..nflows {
                sim_series[i].push(((ci + 1) as f64, bw[i]));
                if let Some(&p) = case.published.get(i) {
                    pub_series[i].push(((ci + 1) as f64, p));
                    let name = format!("{} {}", case.label, self.s.file.flow[i].name);
                    self.check(name, "MB/s", p, bw[i], 0.10, Mode::Within);
                }
            }
            // Ratios to a reference flow.
            let names: Vec<&str> = self.s.file.flow.iter().map(|f| f.name.as_str()).collect();
            let chosen: Vec<usize> = match &case.ratio_of {
                Some(list) => list
                    .iter()
                    .filter_map(|n| names.iter().position(|x| x == n.get_ref()))
                    .collect(),
                None => (0..nflows).collect(),
            };
            if let Some((&r, rest)) = chosen.split_first() {
                for &i in rest {
                    // The ratio the thesis states for its results: the inverse of the
                    // IDTs ("in the ratio of 1/2T : 1/4T : 1/4T, or 2 : 1 : 1", §5.4).
                    let published = idts[r].as_ps() as f64 / idts[i].as_ps().max(1) as f64;
                    let sim = bw[i] / bw[r].max(1e-9);
                    let name = format!("{} ratio {}/{}", case.label, names[i], names[r]);
                    self.check(name, "ratio", published, sim, 0.03, Mode::Within);
                }
            }
        }
        for i in 0..nflows {
            let n = &self.s.file.flow[i].name;
            fig.series.push(
                Series::new(format!("{n} simulated"), sim_series[i].clone())
                    .with_style(Style::Scatter),
            );
            if !pub_series[i].is_empty() {
                fig.series.push(
                    Series::new(format!("{n} published"), pub_series[i].clone())
                        .with_style(Style::Scatter),
                );
            }
        }
        fig.x_range = Some((0.5, cases.len() as f64 + 0.5));
        fig.caption = cases
            .iter()
            .enumerate()
            .map(|(i, c)| format!("case {} = {}", i + 1, c.label))
            .collect::<Vec<_>>()
            .join("; ");
        if !cases.is_empty() {
            self.out.figures.push(fig);
        }
    }

    fn pump_bw(&mut self, idt: Duration, api: Api, firmware: Firmware, size: Bytes) -> f64 {
        let messages = if size.get() >= 16384 {
            self.messages()
        } else {
            (self.messages() * 65536 / size.get().max(1)).min(if self.opt.quick {
                200
            } else {
                2000
            })
        };
        let mut f = self.flow(0, Rate::Idt(idt), Workload::Pump { messages }, api);
        f.message = size;
        let o = self.run(vec![f], firmware, None);
        o.flows.first().and_then(|f| f.pump_mb_s).unwrap_or(0.0)
    }

    fn idt_sweep(&mut self, api: Api) {
        let tick = self.tick();
        let sweep = self.s.sweep.clone();
        let size = self.s.message();
        let mut gm = Vec::new();
        let mut mpi = Vec::new();
        for &idt in &sweep {
            let x = ticks(idt, tick);
            gm.push((x, self.pump_bw(idt, Api::Gm, self.s.firmware(), size)));
            if api == Api::Mpi {
                mpi.push((x, self.pump_bw(idt, Api::Mpi, self.s.firmware(), size)));
            }
        }
        let bmax = gm.iter().find(|p| p.0 == 0.0).map_or_else(
            || self.pump_bw(Duration::ZERO, Api::Gm, self.s.firmware(), size),
            |p| p.1,
        );
        let knee = gm
            .iter()
            .filter(|p| p.1 >= 0.98 * bmax)
            .map(|p| p.0)
            .fold(0.0, f64::max);
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
        self.expects("bmax", "MB/s", |_, _| Some(bmax));
        self.expects("knee", "ticks", |_, _| Some(knee));
        let cap: Vec<f64> = mpi.iter().filter(|p| p.0 < 140.0).map(|p| p.1).collect();
        if !cap.is_empty() {
            let mean = cap.iter().sum::<f64>() / cap.len() as f64;
            self.expects("mpi-cap", "MB/s", |_, _| Some(mean));
        }
    }

    fn receive_vs_send(&mut self) {
        let tick = self.tick();
        let sweep = self.s.sweep.clone();
        let mut out_pts = Vec::new();
        let mut sum_pts = Vec::new();
        let mut by_idt = Vec::new();
        for &idt in &sweep {
            let flows = vec![
                self.flow(0, Rate::Idt(idt), Workload::Stream, Api::Gm),
                self.flow(1, Rate::Idt(Duration::ZERO), Workload::Stream, Api::Gm),
            ];
            let o = self.run(flows, self.s.firmware(), None);
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
        fig.series.push(Series::new("incoming + outgoing", sum_pts));
        self.out.figures.push(fig);
        let _ = tick;
        self.expects("outgoing", "MB/s", |c, i| {
            let at = c.s.expect_at[i]?;
            by_idt.iter().find(|p| p.0 == at).map(|p| p.1)
        });
    }

    fn overhead(&mut self) {
        let sizes = self.s.file.sizes.clone();
        let mut lat = [Vec::new(), Vec::new()];
        let mut bw = [Vec::new(), Vec::new()];
        let iterations = self.s.file.iterations.unwrap_or(50) / if self.opt.quick { 5 } else { 1 };
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
                let o = self.run(vec![f], fw, None);
                let l = o.flows.first().and_then(|f| f.latency_us).unwrap_or(0.0);
                lat[k].push((size.get() as f64, 2.0 * l));
                let b = self.pump_bw(Duration::ZERO, Api::Gm, fw, size);
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
        self.expects("latency-overhead-avg", "%", |_, _| Some(lat_over));
        self.expects("bandwidth-loss-avg", "%", |_, _| Some(loss_avg));
        self.expects("bandwidth-loss-worst", "%", |_, _| Some(loss_worst));
    }
}
