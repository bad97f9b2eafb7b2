//! The scenario kinds that run under the bandwidth resource manager: best-effort
//! timelines (thesis §5.6, Fig 5.11–5.12) and network contention on cascaded switches
//! (§2.3 Fig 2.4, §3.2 Fig 3.2).

use qos_core::units::{Duration, Time};

use qos_sim::myrinet::{FlowSpec, Outcome, Rate, Workload};

use super::run::{Ctx, RunError};
use super::scenario::Metric;
use crate::check::Comparison;
use crate::report::{Figure, Series, Style};

impl Ctx<'_> {
    fn managed_flows(&self) -> Vec<FlowSpec> {
        (0..self.s.file.flow.len())
            .map(|i| {
                let d = &self.s.file.flow[i];
                let rate = if let Some(b) = &d.bandwidth {
                    Rate::Premium(*b.get_ref())
                } else if d.best_effort {
                    Rate::BestEffort
                } else {
                    Rate::Idt(self.s.flow_idts[i].unwrap_or(Duration::ZERO))
                };
                let mut f = self.flow(i, rate, Workload::Stream, self.s.api());
                f.start = Time::ZERO + d.start.unwrap_or(Duration::ZERO);
                f.stop = d.stop.map(|s| Time::ZERO + s);
                f
            })
            .collect()
    }

    pub(super) fn timeline(&mut self) -> Result<(), RunError> {
        let tick = self.tick();
        let bin = tick * 1000;
        let flows = self.managed_flows();
        let names: Vec<String> = flows.iter().map(|f| f.name.clone()).collect();
        let topology = self.calibrated_topology()?;
        let o = self.run_on(topology, flows, self.s.firmware(), Some(bin))?;
        let mut fig = Figure::new(
            format!("{}-dispatch", self.s.file.name),
            format!("Fig {}: {}", self.s.file.figure, self.s.file.title),
            "Time (ms)",
            "Packets dispatched per 1000 RTC ticks",
        );
        let bin_ms = bin.as_secs_f64() * 1e3;
        for (i, f) in o.flows.iter().enumerate() {
            let pts = f
                .dispatches
                .iter()
                .enumerate()
                .map(|(k, &c)| (k as f64 * bin_ms, c as f64))
                .collect();
            fig.series
                .push(Series::new(names[i].clone(), pts).with_style(Style::Step));
        }
        self.out.figures.push(fig);
        let mtu = self.s.calibration.packet.mtu.get() as f64;
        let phase = |c: &Ctx, i: usize| -> Option<f64> {
            let e = &c.s.file.expect[i];
            let fi = names
                .iter()
                .position(|n| Some(n) == e.flow.as_ref().map(|f| f.get_ref()))?;
            let (a, b) = (
                e.from?.as_ps() / bin.as_ps(),
                e.until?.as_ps() / bin.as_ps(),
            );
            let d = &o.flows[fi].dispatches;
            let bins = b.saturating_sub(a).max(1);
            let total: u64 = (a..b)
                .map(|k| *d.get(k as usize).unwrap_or(&0) as u64)
                .sum();
            Some(total as f64 / bins as f64)
        };
        let per_bin_to_mb = mtu / bin.as_secs_f64() / 1e6;
        self.expects(Metric::Rate, |c, i| {
            phase(c, i).map(|p| (p * per_bin_to_mb, None))
        });
        Ok(())
    }

    pub(super) fn contention(&mut self) -> Result<(), RunError> {
        let managed = self.managed_flows();
        let names: Vec<String> = managed.iter().map(|f| f.name.clone()).collect();
        let free: Vec<FlowSpec> = managed
            .iter()
            .cloned()
            .map(|mut f| {
                f.rate = Rate::Idt(Duration::ZERO);
                f
            })
            .collect();
        let topology = self.calibrated_topology()?;
        let a = self.run_on(topology.clone(), free, self.s.firmware(), None)?;
        let b = self.run_on(topology, managed, self.s.firmware(), None)?;
        let bw = |o: &Outcome| o.flows.iter().map(|f| f.window_mb_s).collect::<Vec<_>>();
        let (ua, ma) = (bw(&a), bw(&b));
        let mut fig = Figure::new(
            format!("{}-flows", self.s.file.name),
            format!("Fig {}: {}", self.s.file.figure, self.s.file.title),
            "flow",
            "Bandwidth (MB/s)",
        )
        .with_categories(names.iter().cloned());
        let pts = |v: &[f64]| {
            v.iter()
                .enumerate()
                .map(|(i, &y)| ((i + 1) as f64, y))
                .collect()
        };
        fig.series
            .push(Series::new("round-robin switches only", pts(&ua)).with_style(Style::Scatter));
        fig.series
            .push(Series::new("rate control by the manager", pts(&ma)).with_style(Style::Scatter));
        self.out.figures.push(fig);
        if ua.len() >= 2 {
            let (ur, mr, mb) = (ua[1] / ua[0].max(1e-9), ma[1] / ma[0].max(1e-9), ma[1]);
            // B against A: the ratio shown, the two bandwidths an ordering compares.
            let (ub, ua_) = (ua[1], ua[0]);
            let (mb_, ma_) = (ma[1], ma[0]);
            self.expects(Metric::BOverAUnregulated, |_, _| {
                Some((ur, Some(Comparison::new(ub, ua_))))
            });
            self.expects(Metric::BOverARegulated, |_, _| {
                Some((mr, Some(Comparison::new(mb_, ma_))))
            });
            self.expects(Metric::BRegulated, |_, _| Some((mb, None)));
        }
        Ok(())
    }
}
