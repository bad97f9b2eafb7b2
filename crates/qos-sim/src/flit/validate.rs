//! Checks of a flit-network configuration: everything the model
//! relies on, once, before a network is built. Each refusal names the key at fault as
//! a path (`router.buffer`, `classes[2].rate`) so that the scenario parser can point at
//! its line in the file (the experiments library's flit scenarios); the message says what is
//! allowed.

use qos_core::vlarb::{VlArbConfig, CONTROL_VL, MAX_VLS};

use super::anynet::AnyNet;
use super::config::{
    Allocator, Dateline, FlitConfig, HcaModel, MeshRouting, Pattern, PriorityRule, Process,
    TopologySpec, MAX_CREDIT_DELAY, MAX_CYCLES, MAX_PRIORITY_CLASSES,
};
use super::error::FlitError;
use super::topology::{Ties, MAX_DIMS, MAX_STAGES};

/// Largest router state a configuration may ask for, in bytes: beyond it the run
/// would take minutes per thousand cycles and gigabytes of memory.
pub const MAX_STATE_BYTES: u64 = 4 << 30;

/// Most routers of a mesh or torus (a 256×256 mesh).
pub const MAX_ROUTERS: u32 = MAX_K * MAX_K;

/// Largest mesh or torus side.
pub const MAX_K: u32 = 256;

impl FlitConfig {
    /// Checks everything a model relies on; the error names the key at fault.
    pub fn validate(&self) -> Result<(), FlitError> {
        let bad = |key: &str, m: String| Err(FlitError::config(key, m));
        match self.topology {
            TopologySpec::Crossbar { ports } if !(1..=64).contains(&ports) => {
                return bad(
                    "topology.ports",
                    format!("topology.ports = {ports}: must be 1-64"),
                )
            }
            TopologySpec::Mesh { k, .. } | TopologySpec::Torus { k, .. }
                if !(1..=MAX_K).contains(&k) =>
            {
                return bad("topology.k", format!("topology.k = {k}: must be 1-{MAX_K}"))
            }
            TopologySpec::Mesh { n, .. } | TopologySpec::Torus { n, .. }
                if !(1..=MAX_DIMS).contains(&n) =>
            {
                return bad(
                    "topology.n",
                    format!("topology.n = {n}: must be 1-{MAX_DIMS} dimensions"),
                )
            }
            TopologySpec::Mesh { k, n, .. } | TopologySpec::Torus { k, n, .. }
                if k.checked_pow(n).is_none_or(|r| r > MAX_ROUTERS) =>
            {
                return bad(
                    "topology.k",
                    format!(
                        "topology.k = {k}, n = {n}: {k}^{n} routers, at most {MAX_ROUTERS} ({MAX_K}x{MAX_K})"
                    ),
                )
            }
            TopologySpec::Fly { k, .. } if !(2..=64).contains(&k) => {
                return bad("topology.k", format!("topology.k = {k}: a butterfly's routers have 2-64 ports"))
            }
            TopologySpec::Fly { k, n } if n == 0 || k.checked_pow(n).is_none_or(|r| r > MAX_ROUTERS) => {
                return bad(
                    "topology.n",
                    format!("topology.n = {n}: 1 or more stages, k^n at most {MAX_ROUTERS} nodes"),
                )
            }
            TopologySpec::FatTree { k, .. } if !(2..=32).contains(&k) => {
                return bad(
                    "topology.k",
                    format!("topology.k = {k}: a fat tree's routers have k = 2-32 ports down and k up"),
                )
            }
            TopologySpec::FatTree { k, n }
                if !(1..=MAX_STAGES as u32).contains(&n)
                    || k.checked_pow(n).is_none_or(|r| r > MAX_ROUTERS) =>
            {
                return bad(
                    "topology.n",
                    format!(
                        "topology.n = {n}: 1-{MAX_STAGES} levels, k^n at most {MAX_ROUTERS} nodes"
                    ),
                )
            }
            TopologySpec::Cmesh { k, .. } if !(2..=128).contains(&k) => {
                return bad(
                    "topology.k",
                    format!("topology.k = {k}: a concentrated mesh has 2-128 routers per side (4k² nodes)"),
                )
            }
            TopologySpec::Cmesh {
                k, express: true, ..
            } if k % 2 == 1 => {
                return bad(
                    "topology.express",
                    format!("topology.express: a concentrated mesh of odd side (k = {k}) has no consistent express channels (BookSim2 feeds one router's into two routers)"),
                )
            }
            TopologySpec::Cmesh {
                routing, express: true, ..
            } if routing != MeshRouting::Dor => {
                return bad(
                    "topology.express",
                    format!("topology.express: the express channels are taken by `dor` only (BookSim2's `dor_cmesh`), not `{}`", routing.name()),
                )
            }
            TopologySpec::Cmesh { routing, .. }
                if !matches!(routing, MeshRouting::Dor | MeshRouting::XyYx) =>
            {
                return bad(
                    "topology.routing",
                    format!(
                        "topology.routing = \"{}\": a concentrated mesh routes by `dor` or `xy_yx` (BookSim2's `dor_no_express`, `xy_yx_no_express`)",
                        routing.name()
                    ),
                )
            }
            TopologySpec::Flatfly { c, .. } if !matches!(c, 1 | 4 | 9) => {
                return bad(
                    "topology.c",
                    format!("topology.c = {c}: a flattened butterfly's routers have 1, 4 or 9 HCAs (a square block, BookSim2's xr = yr = 1-3)"),
                )
            }
            TopologySpec::Flatfly { routing, .. }
                if routing == MeshRouting::Romm =>
            {
                return bad(
                    "topology.routing",
                    format!(
                        "topology.routing = \"{}\": a flattened butterfly routes by `dor`, `xy_yx`, `adaptive_xy_yx` or `valiant` (BookSim2's `ran_min`, `xyyx`, `adaptive_xyyx`, `valiant`)",
                        routing.name()
                    ),
                )
            }
            TopologySpec::Flatfly { k, c, .. } if k < 2 || c + 2 * (k - 1) > 64 => {
                return bad(
                    "topology.k",
                    format!("topology.k = {k}: a flattened butterfly has 2 or more routers per side, and c + 2(k - 1) = {} ports per router at most 64", c.saturating_add(2 * k.saturating_sub(1))),
                )
            }
            TopologySpec::Graph { graph: None, .. } => {
                return bad("topology.file", self.topology.unloaded())
            }
            TopologySpec::Anynet { ref network } => {
                let a = AnyNet::parse(network)
                    .map_err(|m| FlitError::config("topology.network", format!("topology.network: {m}")))?;
                if !self.is_booksim2() && a.longest() > 1 {
                    return bad(
                        "topology.network",
                        format!("topology.network: a channel of latency {} under delays other than BookSim2's, whose router links all take the delays' latency; the listing's latencies apply under delays = \"booksim2\"", a.longest()),
                    );
                }
            }
            TopologySpec::Mesh {
                routing: MeshRouting::Ugal,
                ..
            } => {
                return bad(
                    "topology.routing",
                    "topology.routing = \"ugal\": on a flattened butterfly only (BookSim2's `ugal_flatfly_onchip`)".into(),
                )
            }
            TopologySpec::Torus { routing, n, .. } if !routing.is_dor() => {
                if routing != MeshRouting::Valiant {
                    return bad(
                        "topology.routing",
                        format!(
                            "topology.routing = \"{}\": a torus routes by `dor` or `valiant`",
                            routing.name()
                        ),
                    );
                }
                if n > 4 {
                    return bad(
                        "topology.n",
                        format!(
                            "topology.n = {n}: `valiant` on a torus is modelled up to 4 dimensions"
                        ),
                    );
                }
                if self.dateline() != Dateline::OnEntry {
                    return bad(
                        "topology.dateline",
                        "topology.routing = \"valiant\" on a torus takes its dateline lanes on \
                         entry (BookSim2's `valiant_torus`): dateline = \"on_entry\""
                            .to_string(),
                    );
                }
            }
            _ => {}
        }
        let torus = matches!(self.topology, TopologySpec::Torus { .. });
        if self.router.buffer == 0 || self.router.buffer > 1024 {
            return bad(
                "router.buffer",
                format!(
                    "router.buffer = {}: must be 1-1024 flits",
                    self.router.buffer
                ),
            );
        }
        if self.router.lane_order != super::config::LaneOrder::default()
            && self.allocator().is_booksim2()
        {
            return bad(
                "router.lane_order",
                "router.lane_order: applies to Yum's VL arbiters; BookSim2's separable allocator orders the headers of a cycle by its own arbiters".into(),
            );
        }
        for (key, v, most) in [
            (
                "router.credit_delay",
                self.router.credit_delay,
                MAX_CREDIT_DELAY - 3,
            ),
            ("router.routing_delay", self.router.routing_delay, 1_000),
        ] {
            let Some(v) = v else { continue };
            if !self.is_booksim2() {
                return bad(
                    key,
                    format!("{key}: BookSim2's key, for delays = \"booksim2\" only; with other delays write the stages out"),
                );
            }
            if v > most {
                return bad(key, format!("{key} = {v}: at most {most} cycles"));
            }
        }
        if self.phases.stop_sources && self.hca_model() != super::config::HcaModel::SourceQueue {
            return bad(
                "phases.stop_sources",
                "phases.stop_sources: BookSim2's `sim_type = throughput` drain stops BookSim2's terminal (hca.model = \"source_queue\", the default under delays = \"booksim2\")".into(),
            );
        }
        if self.router.use_noc_latency.is_some() && !self.is_booksim2() {
            let key = "router.use_noc_latency";
            return bad(
                key,
                format!("{key}: BookSim2's key, for delays = \"booksim2\" only; with other delays write `router_link` out"),
            );
        }
        let booksim_alloc = self.allocator().is_booksim2();
        if let Some(s) = self.router.input_speedup {
            let key = "router.input_speedup";
            if !booksim_alloc {
                return bad(
                    key,
                    format!(
                        "{key}: applies to BookSim2's allocators (separable_input_first, islip)"
                    ),
                );
            }
            if !(1..=2).contains(&s) {
                return bad(
                    key,
                    format!("{key} = {s}: 1 or 2 crossbar inputs per port are modelled"),
                );
            }
        }
        if self.router.hold_switch_for_packet == Some(true) && !booksim_alloc {
            let key = "router.hold_switch_for_packet";
            return bad(
                key,
                format!("{key}: applies to BookSim2's allocators (separable_input_first, islip)"),
            );
        }
        if self.router.wait_for_tail_credit == Some(true) && !booksim_alloc {
            let key = "router.wait_for_tail_credit";
            return bad(
                key,
                format!("{key}: applies to BookSim2's allocators (separable_input_first, islip)"),
            );
        }
        self.validate_priority(booksim_alloc)?;
        if let Some(n) = self.router.alloc_iters {
            let key = "router.alloc_iters";
            if self.allocator() != super::config::Allocator::Islip {
                return bad(
                    key,
                    format!("{key}: iSLIP's iterations; applies to allocator = \"islip\""),
                );
            }
            if !(1..=16).contains(&n) {
                return bad(key, format!("{key} = {n}: 1-16 iterations"));
            }
        }
        let d = self.delays();
        if self.router.output_buffer.is_some_and(|b| b > 0) {
            if self.allocator().is_booksim2() {
                return bad(
                    "router.output_buffer",
                    "router.output_buffer: applies to Yum's VL arbiters; BookSim2's routers have no output buffers".into(),
                );
            }
            if self.output_buffer() > 255 {
                return bad(
                    "router.output_buffer",
                    format!(
                        "router.output_buffer = {}: must be 0 (none) to 255 flits",
                        self.output_buffer()
                    ),
                );
            }
        }
        if self.output_buffer() > 0 && d.switch_alloc + d.crossbar == 0 {
            return bad("router.output_buffer", "router.output_buffer: the crossbar stages (switch_alloc + crossbar) must take at least one cycle to fill an output buffer".into());
        }
        if d.credit == 0
            || d.host_credit == Some(0)
            || d.switch_alloc + d.crossbar + d.link == 0
            || d.switch_alloc + d.crossbar + d.router_wire() == 0
        {
            return bad("router.delays", "router.delays: credit, host_credit and switch_alloc + crossbar + link (+ router_link) must be at least one cycle".into());
        }
        if d.stages() + d.link.max(d.router_wire()) as u64 > 10_000 {
            return bad(
                "router.delays",
                "router.delays: stage delays above 10000 cycles".into(),
            );
        }
        if d.eject_credit == Some(0) {
            return bad(
                "router.delays.eject_credit",
                "router.delays.eject_credit must be at least one cycle".into(),
            );
        }
        for (key, v) in [
            ("credit", d.credit),
            ("host_credit", d.host_credit_trip()),
            ("eject_credit", d.eject_credit.unwrap_or(1)),
        ] {
            if v > MAX_CREDIT_DELAY {
                return bad(
                    &format!("router.delays.{key}"),
                    format!("router.delays.{key} = {v}: at most {MAX_CREDIT_DELAY} cycles"),
                );
            }
        }
        // The longest link (a flatfly's end to end of a row, a cmesh's express channel):
        // its credits' trip too.
        let longest = match self.topology {
            TopologySpec::Flatfly { k, c, .. } => Some((
                "topology.k",
                format!("topology.k = {k}"),
                c.isqrt() * (k - 1),
            )),
            TopologySpec::Cmesh {
                k, express: true, ..
            } => Some(("topology.k", format!("topology.k = {k}"), 2 * (k / 2))),
            TopologySpec::Anynet { ref network } => AnyNet::parse(network).ok().map(|a| {
                (
                    "topology.network",
                    "topology.network".to_string(),
                    a.longest(),
                )
            }),
            _ => None,
        };
        if let Some((key, what, longest)) = longest {
            let trip = d.credit + longest.saturating_sub(d.router_wire());
            if self.link_lengths() && trip > MAX_CREDIT_DELAY {
                return bad(
                    key,
                    format!("{what}: the longest link's credits take {trip} cycles back under use_noc_latency; at most {MAX_CREDIT_DELAY}"),
                );
            }
        }
        for (key, arb) in [
            ("router.output_arbitration", &self.router.output_arbitration),
            ("router.input_arbitration", &self.router.input_arbitration),
            ("hca.arbitration", &self.hca.arbitration),
        ] {
            arb.build()
                .map_err(|e| FlitError::config(key, format!("{key}: {e}")))?;
        }
        self.validate_booksim2()?;
        if self.allocator().is_booksim2() {
            if d.vl_alloc == 0 {
                return bad("router.delays.vl_alloc", "router.delays.vl_alloc: BookSim2's allocators need at least one cycle of VC allocation".into());
            }
            for (key, arb) in [
                ("router.output_arbitration", &self.router.output_arbitration),
                ("router.input_arbitration", &self.router.input_arbitration),
            ] {
                if *arb != VlArbConfig::RoundRobin {
                    return bad(key, format!("{key}: BookSim2's allocators arbitrate ports round-robin; VL arbitration must be round_robin"));
                }
            }
        }
        if self.hca.vl_buffer == Some(0) {
            return bad(
                "hca.vl_buffer",
                "hca.vl_buffer must be at least 1 flit".into(),
            );
        }
        if self.hca_model() == HcaModel::SourceQueue && self.hca.vl_buffer.is_some() {
            return bad(
                "hca.vl_buffer",
                "hca.vl_buffer: the source_queue model has no VL buffers (its queue is unbounded)"
                    .into(),
            );
        }
        if self.classes.is_empty() {
            return bad("classes", "classes: at least one class is needed".into());
        }
        self.validate_classes(torus)?;
        self.validate_streams()?;
        let p = &self.phases;
        if p.measure == 0 {
            return bad(
                "phases.measure",
                "phases.measure must be at least 1 cycle".into(),
            );
        }
        let total = p
            .warmup
            .saturating_add(p.measure)
            .saturating_add(p.drain_max);
        if total > MAX_CYCLES {
            let key = [
                ("warmup", p.warmup),
                ("measure", p.measure),
                ("drain_max", p.drain_max),
            ]
            .into_iter()
            .max_by_key(|(_, v)| *v)
            .map_or("phases", |(k, _)| k);
            return bad(
                &format!("phases.{key}"),
                format!(
                    "phases: warmup + measure + drain_max = {total} cycles; at most {MAX_CYCLES}"
                ),
            );
        }
        if let Some(t) = p.abort_latency {
            if !(t.is_finite() && t > 0.0) {
                return bad(
                    "phases.abort_latency",
                    format!("phases.abort_latency = {t}: must be a positive number of cycles (false for none)"),
                );
            }
        }
        for (key, t) in [
            ("warmup_thres", p.warmup_thres),
            ("acc_warmup_thres", p.acc_warmup_thres),
            ("stopping_thres", p.stopping_thres),
            ("acc_stopping_thres", p.acc_stopping_thres),
        ] {
            if !t.is_finite() {
                return bad(
                    &format!("phases.{key}"),
                    format!("phases.{key} = {t}: a relative change (negative: no test)"),
                );
            }
        }
        if p.sample_period == 0 || p.sample_period > MAX_CYCLES {
            return bad(
                "phases.sample_period",
                format!(
                    "phases.sample_period = {}: must be 1-{MAX_CYCLES} cycles",
                    p.sample_period
                ),
            );
        }
        if self.watchdog == 0 {
            return bad("watchdog", "watchdog must be at least 1 cycle".into());
        }
        let bytes = self.state_bytes();
        if bytes > MAX_STATE_BYTES {
            let key = match self.topology {
                TopologySpec::Mesh { .. }
                | TopologySpec::Torus { .. }
                | TopologySpec::Fly { .. }
                | TopologySpec::FatTree { .. }
                | TopologySpec::Cmesh { .. }
                | TopologySpec::Flatfly { .. } => "topology.k",
                _ => "router.buffer",
            };
            return bad(
                key,
                format!(
                    "the routers' state would take {:.1} GB (at most {} GB): fewer routers, lanes or buffer slots",
                    bytes as f64 / 1e9,
                    MAX_STATE_BYTES >> 30
                ),
            );
        }
        Ok(())
    }

    /// Under BookSim2's delays the network is BookSim2's: a setting written to
    /// something else is refused, at its key.
    fn validate_booksim2(&self) -> Result<(), FlitError> {
        if !self.is_booksim2() {
            return Ok(());
        }
        let bad = |key: &str, what: String, want: &str| {
            Err(FlitError::config(
                key,
                format!("{key} = {what}: delays = \"booksim2\" is BookSim2's network, whose {want}; for another, name the project's delays (\"reference\") or write the stages out"),
            ))
        };
        if let Some(a) = self.router.allocator {
            if !a.is_booksim2() {
                return bad(
                    "router.allocator",
                    format!("{a:?}"),
                    "allocator is separable_input_first or islip",
                );
            }
        }
        if let Some(m) = self.hca.model {
            if m != HcaModel::SourceQueue {
                return bad("hca.model", format!("{m:?}"), "terminal is source_queue");
            }
        }
        if let TopologySpec::Torus { ties, dateline, .. } = self.topology {
            if ties.is_some_and(|t| t != Ties::Random) {
                return bad(
                    "topology.ties",
                    format!("{:?}", ties.unwrap_or_default()),
                    "torus breaks ties at random",
                );
            }
            if dateline.is_some_and(|d| d != Dateline::OnEntry) {
                return bad(
                    "topology.dateline",
                    format!("{:?}", dateline.unwrap_or_default()),
                    "torus chooses dateline lanes on entry",
                );
            }
        }
        Ok(())
    }

    /// `router.priority`: BookSim2's allocators, the router variants it is modelled
    /// with, and the classes it ranks.
    fn validate_priority(&self, booksim_alloc: bool) -> Result<(), FlitError> {
        let rule = self.router.priority;
        if rule.is_none() {
            return Ok(());
        }
        let key = "router.priority";
        let bad = |m: String| Err(FlitError::config(key, m));
        if !booksim_alloc {
            return bad(format!(
                "{key}: BookSim2's packet priorities apply to BookSim2's allocators \
                 (separable_input_first, islip); Yum's routers rank lanes by their VL arbiters"
            ));
        }
        if self.allocator() == Allocator::SeparableInputFirst {
            if self.router.input_speedup.unwrap_or(1) > 1 {
                return bad(format!(
                    "{key} with router.input_speedup = 2: not modelled (one crossbar input per port)"
                ));
            }
            if self.router.hold_switch_for_packet == Some(true) {
                return bad(format!(
                    "{key} with router.hold_switch_for_packet: not modelled"
                ));
            }
        }
        if rule == PriorityRule::Class && self.classes.len() > MAX_PRIORITY_CLASSES {
            return bad(format!(
                "{key} = \"class\": at most {MAX_PRIORITY_CLASSES} classes (the scenario has {})",
                self.classes.len()
            ));
        }
        if rule == PriorityRule::Age && self.hca_model() != HcaModel::SourceQueue {
            return bad(format!(
                "{key} = \"age\": ranks the classes' front packets at BookSim2's terminal; \
                 needs hca.model = \"source_queue\" (the DMA HCA serves classes by their priority)"
            ));
        }
        Ok(())
    }

    fn validate_classes(&self, torus: bool) -> Result<(), FlitError> {
        let n = self.nodes();
        let mut used: u32 = 0;
        // BookSim2's classes share every VC (its routing functions give each class
        // `0 .. num_vcs - 1`): its terminal keeps each class's packets apart, where
        // Yum's DMA would interleave two classes' flits in one VL buffer.
        let shared = self.allocator().is_booksim2() && self.hca_model() == HcaModel::SourceQueue;
        for (i, c) in self.classes.iter().enumerate() {
            let at = format!("classes[{i}] ({})", c.name);
            let key = |k: &str| format!("classes[{i}].{k}");
            let bad = |k: &str, m: String| Err(FlitError::config(&key(k), m));
            if c.vls.is_empty() {
                return bad("vls", format!("{at}.vls: at least one lane"));
            }
            for &v in &c.vls {
                if v as usize >= MAX_VLS {
                    return bad("vls", format!("{at}.vls: lane {v} out of range (0-15)"));
                }
                if used & (1 << v) != 0 && !shared {
                    return bad(
                        "vls",
                        format!(
                            "{at}.vls: lane {v} already belongs to another class (classes share \
                             lanes only in BookSim2's network: a BookSim2 allocator and \
                             hca.model = \"source_queue\")"
                        ),
                    );
                }
                used |= 1 << v;
            }
            if torus && c.vls.len() < 2 {
                return bad(
                    "vls",
                    format!("{at}.vls: a torus needs at least two lanes per class (dateline)"),
                );
            }
            // Yum's VL arbiters serve VL15 before every other lane; BookSim2's allocators
            // treat it as any other, so there it may carry data beside the others
            // (BookSim2's default of 16 VCs).
            if c.vls.contains(&(CONTROL_VL as u8))
                && c.vls.len() > 1
                && !torus
                && !self.allocator().is_booksim2()
            {
                return bad(
                    "vls",
                    format!("{at}.vls: VL15 is for control traffic alone under Yum's VL arbiters (BookSim2's allocators treat it as any lane)"),
                );
            }
            if torus && c.keep_lane {
                return bad(
                    "keep_lane",
                    format!("{at}.keep_lane: a torus moves packets between dateline lanes"),
                );
            }
            if c.packet_flits == 0 || c.packet_flits > 100_000 {
                return bad(
                    "packet_flits",
                    format!("{at}.packet_flits = {}: must be 1-100000", c.packet_flits),
                );
            }
            if !(0.0..=1.0).contains(&c.rate) || !c.rate.is_finite() {
                return bad(
                    "rate",
                    format!("{at}.rate = {}: must be 0-1 packets/node/cycle", c.rate),
                );
            }
            let mut weights = 0u64;
            for (j, m) in c.packet_mix.iter().enumerate() {
                if m.flits == 0 || m.flits > 100_000 || m.weight == 0 {
                    return bad(
                        "packet_mix",
                        format!(
                            "{at}.packet_mix[{j}] = {{ flits = {}, weight = {} }}: flits must be \
                             1-100000 and weight at least 1",
                            m.flits, m.weight
                        ),
                    );
                }
                weights += m.weight as u64;
            }
            if weights > u32::MAX as u64 {
                return bad(
                    "packet_mix",
                    format!("{at}.packet_mix: the weights add up to {weights}, more than 2^32 - 1"),
                );
            }
            if let Process::OnOff { alpha, beta } = c.process {
                if !(alpha > 0.0 && alpha <= 1.0 && (0.0..=1.0).contains(&beta)) {
                    return bad(
                        "process",
                        format!(
                            "{at}.process: on_off needs 0 < alpha <= 1 and 0 <= beta <= 1 \
                             (alpha = {alpha}, beta = {beta})"
                        ),
                    );
                }
                let r1 = c.process.peak(c.rate);
                if r1 > 1.0 {
                    return bad(
                        "process",
                        format!(
                            "{at}.process: on_off at rate {} needs an on node to inject with \
                             probability rate * (alpha + beta) / alpha = {r1:.4}, above 1 \
                             (lower the rate or beta, or raise alpha)",
                            c.rate
                        ),
                    );
                }
            }
            if let TopologySpec::Torus { routing, .. } = self.topology {
                if routing.two_phase() && (c.vls.len() < 4 || c.keep_lane) {
                    return bad(
                        "topology.routing",
                        format!(
                            "topology.routing = \"valiant\" on a torus: {at} needs four lanes or \
                             more, one quarter per dateline class and phase{}",
                            if c.keep_lane {
                                ", and cannot keep its injection lane (keep_lane)"
                            } else {
                                ""
                            }
                        ),
                    );
                }
            }
            if let TopologySpec::Mesh { routing, .. }
            | TopologySpec::Cmesh { routing, .. }
            | TopologySpec::Flatfly { routing, .. } = self.topology
            {
                if routing.splits_lanes() && (c.vls.len() < 2 || c.keep_lane) {
                    let half = if routing.two_phase() {
                        "phase"
                    } else {
                        "dimension order"
                    };
                    return bad(
                        "topology.routing",
                        format!(
                            "topology.routing = \"{}\": {at} needs two lanes or more, one \
                             half per {half}{}",
                            routing.name(),
                            if c.keep_lane {
                                ", and cannot keep its injection lane (keep_lane)"
                            } else {
                                ""
                            }
                        ),
                    );
                }
            }
            match &c.pattern {
                Pattern::Tornado | Pattern::Neighbor if self.topology.digits().is_some() => {}
                Pattern::Transpose | Pattern::Tornado | Pattern::Neighbor => {
                    let s = (n as f64).sqrt() as u32;
                    if s * s != n {
                        let name = match c.pattern {
                            Pattern::Transpose => "transpose",
                            Pattern::Tornado => "tornado",
                            _ => "neighbor",
                        };
                        return bad(
                            "pattern",
                            format!("{at}.pattern: {name} needs a square node count, not {n}"),
                        );
                    }
                }
                Pattern::BitComplement | Pattern::BitReverse | Pattern::Shuffle
                    if !n.is_power_of_two() =>
                {
                    return bad(
                        "pattern",
                        format!(
                            "{at}.pattern: {} needs a power-of-two node count, not {n}",
                            match c.pattern {
                                Pattern::BitComplement => "bit_complement",
                                Pattern::BitReverse => "bit_reverse",
                                _ => "shuffle",
                            }
                        ),
                    );
                }
                Pattern::UniformOthers if n < 2 => {
                    return bad(
                        "pattern",
                        format!("{at}.pattern: uniform_others needs two nodes"),
                    );
                }
                Pattern::Hotspot {
                    nodes,
                    fraction,
                    weights,
                } => {
                    if nodes.is_empty() || nodes.iter().any(|&h| h >= n) {
                        return bad(
                            "pattern.nodes",
                            format!("{at}.pattern.nodes: need nodes below {n}"),
                        );
                    }
                    if !(0.0..=1.0).contains(fraction) {
                        return bad(
                            "pattern.fraction",
                            format!("{at}.pattern.fraction must be 0-1"),
                        );
                    }
                    let sum = weights.iter().try_fold(0u32, |a, &w| a.checked_add(w));
                    if !weights.is_empty()
                        && (weights.len() != nodes.len() || weights.contains(&0) || sum.is_none())
                    {
                        return bad(
                            "pattern.weights",
                            format!(
                                "{at}.pattern.weights: one weight of at least 1 per hotspot \
                                 node ({} nodes, {} weights), adding up to less than 2^32",
                                nodes.len(),
                                weights.len()
                            ),
                        );
                    }
                }
                Pattern::Asymmetric if n < 2 => {
                    return bad(
                        "pattern",
                        format!("{at}.pattern: asymmetric needs two nodes"),
                    );
                }
                Pattern::Taper64 if n != 64 => {
                    return bad(
                        "pattern",
                        format!("{at}.pattern: taper64 needs exactly 64 nodes, not {n}"),
                    );
                }
                Pattern::Background { excluded } => {
                    if let Some(e) = excluded.iter().find(|&&e| e >= n) {
                        return bad(
                            "pattern.excluded",
                            format!("{at}.pattern.excluded: node {e}: nodes are below {n}"),
                        );
                    }
                    let mut distinct = excluded.clone();
                    distinct.sort_unstable();
                    distinct.dedup();
                    if distinct.len() as u64 >= n as u64 {
                        return bad(
                            "pattern.excluded",
                            format!("{at}.pattern.excluded: every node is excluded"),
                        );
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn validate_streams(&self) -> Result<(), FlitError> {
        let n = self.nodes();
        for (i, s) in self.streams.iter().enumerate() {
            let at = format!("streams[{i}] ({})", s.name);
            let bad = |k: &str, m: String| Err(FlitError::config(&format!("streams[{i}].{k}"), m));
            if s.src >= n {
                return bad("src", format!("{at}.src: nodes must be below {n}"));
            }
            if s.dst >= n {
                return bad("dst", format!("{at}.dst: nodes must be below {n}"));
            }
            if s.period == 0 {
                return bad("period", format!("{at}.period must be at least 1 cycle"));
            }
            if !self.classes.iter().any(|c| c.name == s.class) {
                return bad("class", format!("{at}.class: no class named '{}'", s.class));
            }
        }
        Ok(())
    }

    /// Bytes of router state the network will hold: per input VC its record, ring
    /// and wait-list link, per port its record.
    pub fn state_bytes(&self) -> u64 {
        let ports: u64 = match &self.topology {
            TopologySpec::Crossbar { ports } => *ports as u64,
            TopologySpec::Mesh { k, n, .. } | TopologySpec::Torus { k, n, .. } => {
                (2 * *n as u64 + 1) * (*k as u64).saturating_pow(*n)
            }
            TopologySpec::Fly { k, n } => *n as u64 * (*k as u64).saturating_pow(*n),
            TopologySpec::FatTree { k, n } => {
                (2 * *n as u64).saturating_sub(1) * (*k as u64).saturating_pow(*n)
            }
            TopologySpec::Cmesh { k, .. } => 8 * (*k as u64).pow(2),
            TopologySpec::Flatfly { k, c, .. } => {
                (*c as u64 + 2 * (*k as u64).saturating_sub(1)) * (*k as u64).pow(2)
            }
            TopologySpec::Graph { graph, .. } => {
                graph.as_ref().map_or(0, |f| f.total_ports() as u64)
            }
            TopologySpec::Anynet { network } => {
                AnyNet::parse(network).map_or(0, |a| a.total_ports())
            }
        };
        let max_vl = self
            .classes
            .iter()
            .flat_map(|c| c.vls.iter().copied())
            .max()
            .unwrap_or(0) as u64;
        let lanes = (max_vl + 1).next_power_of_two();
        let ring = self.router.buffer.max(1) as u64;
        ports * lanes * (48 + 8 * ring + 4) + ports * 48
    }
}
