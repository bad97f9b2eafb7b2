//! The topology file format (TOML, documented with a full example in
//! `docs/topology.md`): read by `clusterqos admit`, the simulator and the manager.
//!
//! Parsing goes through [`crate::source::parse_toml`], so unknown keys, bad units and
//! negative numbers come out as `file:line:col: message`; semantic errors found while
//! building (unknown node, a port that does not exist or is used twice, a zero
//! capacity, a route that does not follow the cables) point at the line of the value at
//! fault through `toml::Spanned`. Nothing here reads files: a file that embeds a
//! topology (`topology = "path"` or an inline `[topology]` table) uses
//! [`TopologySource`] and passes a reader callback.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

use super::build::{self, HostDefaults, Quantity, TopologyBuilder, TopologyError};
use super::{NodeCapacity, PortRef, RateParams, RoutingKind, Topology, FULL_COST};
use crate::source::{parse_toml, Located};
use crate::units::{Bandwidth, Duration};

/// A bandwidth limit that may be switched off with `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// No limit of this kind.
    Unlimited,
    /// At most this much.
    At(Bandwidth),
}

impl Limit {
    fn get(self) -> Option<Bandwidth> {
        match self {
            Limit::Unlimited => None,
            Limit::At(b) => Some(b),
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Limit;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a bandwidth such as \"81.8MB/s\", or \"unlimited\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Limit, E> {
                if v.trim() == "unlimited" {
                    return Ok(Limit::Unlimited);
                }
                v.parse().map(Limit::At).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Limit, E> {
                u64::try_from(v)
                    .map(|b| Limit::At(Bandwidth::from_bytes_per_sec(b)))
                    .map_err(|_| E::custom("a bandwidth must not be negative"))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Limit, E> {
                Ok(Limit::At(Bandwidth::from_bytes_per_sec(v)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration as written, parsed once the file's `tick` is known ("96ticks").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawDuration(String);

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RawDuration;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a duration such as \"48us\" or \"96ticks\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawDuration, E> {
                Ok(RawDuration(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawDuration, E> {
                if v < 0 {
                    return Err(E::custom("a duration must not be negative"));
                }
                Ok(RawDuration(format!("{v}ps")))
            }
        }
        d.deserialize_any(V)
    }
}

/// Host parameters: in `[defaults]` for every host, or per `[[host]]` to override.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostParams {
    /// T, the minimum inter-dispatch time ("48us", "96ticks").
    pub t: Option<Spanned<RawDuration>>,
    /// Bmax, the peak bandwidth of one unregulated flow.
    pub bmax: Option<Spanned<Bandwidth>>,
    /// Send limit (default: Bmax).
    pub send: Option<Spanned<Limit>>,
    /// Receive limit (default: unlimited).
    pub receive: Option<Spanned<Limit>>,
    /// Combined send + receive_cost·receive limit (default: Bmax).
    pub combined: Option<Spanned<Limit>>,
    /// Cost of a received byte in the combined limit (default 1.0).
    pub receive_cost: Option<Spanned<f64>>,
    /// What the host shares among its best-effort flows at most (default: its capacity).
    pub best_effort: Option<Spanned<Bandwidth>>,
    /// Capacity of the host's cable, both directions (default 160 MB/s).
    pub link: Option<Spanned<Bandwidth>>,
}

/// The ready-made shapes of `[build]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShapeKind {
    /// Hosts n0.. on one switch s0 (`hosts`).
    Crossbar,
    /// Switches s0.. in a chain with hosts on each (`switches`, `hosts_per_switch`,
    /// optional `trunk`).
    Cascade,
    /// A k×k mesh with dimension-order routing (`k`).
    Mesh,
}

/// `[build]`: a ready-made shape, extended by the explicit lists.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Which shape.
    pub shape: Spanned<ShapeKind>,
    /// Crossbar: number of hosts.
    pub hosts: Option<u16>,
    /// Cascade: number of switches.
    pub switches: Option<u16>,
    /// Cascade: hosts per switch.
    pub hosts_per_switch: Option<u16>,
    /// Cascade: switch-to-switch cable capacity (default: the host link).
    pub trunk: Option<Spanned<Bandwidth>>,
    /// Mesh: side of the mesh.
    pub k: Option<u16>,
}

/// `[[switch]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Unique name.
    pub name: Spanned<String>,
    /// Number of ports (0..ports).
    pub ports: Spanned<u16>,
}

/// `[[host]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Unique name.
    pub name: Spanned<String>,
    /// The switch port the host is cabled to, "switch:port".
    pub port: Spanned<String>,
    /// Overrides of `[defaults]` (same meaning as there).
    pub t: Option<Spanned<RawDuration>>,
    /// See [`HostParams::bmax`].
    pub bmax: Option<Spanned<Bandwidth>>,
    /// See [`HostParams::send`].
    pub send: Option<Spanned<Limit>>,
    /// See [`HostParams::receive`].
    pub receive: Option<Spanned<Limit>>,
    /// See [`HostParams::combined`].
    pub combined: Option<Spanned<Limit>>,
    /// See [`HostParams::receive_cost`].
    pub receive_cost: Option<Spanned<f64>>,
    /// See [`HostParams::best_effort`].
    pub best_effort: Option<Spanned<Bandwidth>>,
    /// See [`HostParams::link`].
    pub link: Option<Spanned<Bandwidth>>,
}

impl HostSpec {
    /// This host's overrides as a [`HostParams`].
    pub fn params(&self) -> HostParams {
        HostParams {
            t: self.t.clone(),
            bmax: self.bmax.clone(),
            send: self.send.clone(),
            receive: self.receive.clone(),
            combined: self.combined.clone(),
            receive_cost: self.receive_cost.clone(),
            best_effort: self.best_effort.clone(),
            link: self.link.clone(),
        }
    }
}

/// `[[link]]`: a cable between two switch ports.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// One end, "switch:port".
    pub a: Spanned<String>,
    /// The other end.
    pub b: Spanned<String>,
    /// Capacity in both directions (default: `[defaults] link`).
    pub capacity: Option<Spanned<Bandwidth>>,
    /// Capacity from a to b (overrides `capacity`).
    pub a_to_b: Option<Spanned<Bandwidth>>,
    /// Capacity from b to a (overrides `capacity`).
    pub b_to_a: Option<Spanned<Bandwidth>>,
}

/// `[[route]]`: an explicit source route.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Source host.
    pub from: Spanned<String>,
    /// Destination host.
    pub to: Spanned<String>,
    /// Output ports in order, "switch:port".
    pub ports: Vec<Spanned<String>>,
}

/// A whole topology as written in TOML.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// Length of a clock tick, enabling "96ticks" (e.g. "0.5us" for the LANai 4.3).
    pub tick: Option<Spanned<RawDuration>>,
    /// "shortest-path" (default) or "dimension-order" (meshes from `[build]` only).
    pub routing: Option<Spanned<RoutingKind>>,
    /// Parameters of every host.
    pub defaults: Option<HostParams>,
    /// A ready-made shape, extended by the lists below.
    pub build: Option<Shape>,
    /// Switches.
    #[serde(default)]
    pub switch: Vec<SwitchSpec>,
    /// Hosts.
    #[serde(default)]
    pub host: Vec<HostSpec>,
    /// Switch-to-switch cables.
    #[serde(default)]
    pub link: Vec<LinkSpec>,
    /// Explicit routes.
    #[serde(default)]
    pub route: Vec<RouteSpec>,
}

/// Where a file that embeds a topology finds it: `topology = "path"` or an inline
/// `[topology]` table.
#[derive(Debug, Clone)]
pub enum TopologySource {
    /// A path, relative to the embedding file.
    Path(String),
    /// The topology itself.
    Inline(Box<TopologySpec>),
}

impl<'de> Deserialize<'de> for TopologySource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopologySource;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a path to a topology file, or a [topology] table")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TopologySource, E> {
                Ok(TopologySource::Path(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TopologySource, A::Error> {
                TopologySpec::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|s| TopologySource::Inline(Box::new(s)))
            }
        }
        d.deserialize_any(V)
    }
}

impl TopologySource {
    /// Builds the topology. `source` is the embedding file's `topology` value, `file`
    /// and `text` that file's name and contents; `read` is called with the path as
    /// written for `topology = "path"` and returns the topology file's (name, text)
    /// or a message (reported at the path's line).
    pub fn load(
        source: &Spanned<TopologySource>,
        file: &str,
        text: &str,
        read: impl FnOnce(&str) -> Result<(String, String), String>,
    ) -> Result<Topology, Located> {
        match source.get_ref() {
            TopologySource::Inline(spec) => spec.build(file, text),
            TopologySource::Path(p) => {
                let (name, body) =
                    read(p).map_err(|m| Located::at(file, text, source.span().start, m))?;
                load(&name, &body)
            }
        }
    }
}

/// Parses and builds a topology file.
pub fn load(file: &str, text: &str) -> Result<Topology, Located> {
    parse_toml::<TopologySpec>(file, text)?.build(file, text)
}

/// Ties builder errors to a place in the text.
struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn at<T>(&self, span: &Spanned<T>, msg: impl std::fmt::Display) -> Located {
        Located::at(self.file, self.text, span.span().start, msg.to_string())
    }
    fn port(&self, b: &TopologyBuilder, s: &Spanned<String>) -> Result<PortRef, Located> {
        let text = s.get_ref();
        let (sw, port) = text.rsplit_once(':').ok_or_else(|| {
            self.at(
                s,
                format!("'{text}' is not a switch port: write \"switch:port\", e.g. \"s0:3\""),
            )
        })?;
        let port: u16 = port.trim().parse().map_err(|_| {
            self.at(
                s,
                format!("'{text}': port must be a number from 0, e.g. \"s0:3\""),
            )
        })?;
        let switch = b.switch_id(sw.trim()).map_err(|e| self.at(s, e))?;
        Ok(PortRef { switch, port })
    }
    fn duration(
        &self,
        d: &Spanned<RawDuration>,
        tick: Option<Duration>,
    ) -> Result<Duration, Located> {
        Duration::parse_with_tick(&d.get_ref().0, tick).map_err(|e| self.at(d, e))
    }
}

/// Host parameters after applying `[defaults]` and the host's overrides.
fn host_params(
    c: &Ctx<'_>,
    defaults: &HostParams,
    own: &HostParams,
    tick: Option<Duration>,
) -> Result<HostDefaults, Located> {
    let th = HostDefaults::thesis();
    let pick = |o: &Option<Spanned<Bandwidth>>, d: &Option<Spanned<Bandwidth>>| {
        o.as_ref().or(d.as_ref()).map(|s| *s.get_ref())
    };
    let t = match own.t.as_ref().or(defaults.t.as_ref()) {
        Some(t) => c.duration(t, tick)?,
        None => th.rate.t,
    };
    let bmax = pick(&own.bmax, &defaults.bmax).unwrap_or(th.rate.bmax);
    let limit =
        |o: &Option<Spanned<Limit>>, d: &Option<Spanned<Limit>>, dflt: Option<Bandwidth>| {
            o.as_ref()
                .or(d.as_ref())
                .map_or(dflt, |s| s.get_ref().get())
        };
    let cost_spec = own.receive_cost.as_ref().or(defaults.receive_cost.as_ref());
    let receive_cost_permille = match cost_spec {
        None => FULL_COST,
        Some(s) => {
            let v = *s.get_ref();
            if !(0.0..=10.0).contains(&v) {
                return Err(c.at(s, format!("receive_cost {v} must be between 0 and 10")));
            }
            // Costs are kept exactly, in thousandths (admission sums integers): a value
            // with more decimals would be rounded, and a rounded-down cost over-commits.
            let permille = v * 1000.0;
            if (permille - permille.round()).abs() > 1e-6 {
                return Err(c.at(
                    s,
                    format!(
                        "receive_cost {v} has more than 3 decimals: costs are kept exactly in \
                         thousandths, so write {} or {}",
                        permille.floor() / 1000.0,
                        permille.ceil() / 1000.0
                    ),
                ));
            }
            permille.round() as u16
        }
    };
    Ok(HostDefaults {
        rate: RateParams { t, bmax },
        capacity: NodeCapacity {
            send: limit(&own.send, &defaults.send, Some(bmax)),
            receive: limit(&own.receive, &defaults.receive, None),
            combined: limit(&own.combined, &defaults.combined, Some(bmax)),
            receive_cost_permille,
            best_effort: pick(&own.best_effort, &defaults.best_effort),
        },
        link: pick(&own.link, &defaults.link).unwrap_or(th.link),
    })
}

/// The span of the host parameter a builder error is about: the host's own value, or
/// else the default it took.
fn host_error_span<'a>(
    p: &'a HostParams,
    d: &'a HostParams,
    e: &TopologyError,
) -> Option<std::ops::Range<usize>> {
    let quantity = match e {
        TopologyError::Zero { quantity, .. } | TopologyError::OutOfRange { quantity, .. } => {
            *quantity
        }
        _ => return None,
    };
    let field = |h: &HostParams| -> Option<std::ops::Range<usize>> {
        match quantity {
            Quantity::T => h.t.as_ref().map(|s| s.span()),
            Quantity::Bmax => h.bmax.as_ref().map(|s| s.span()),
            Quantity::Send => h.send.as_ref().map(|s| s.span()),
            Quantity::Receive => h.receive.as_ref().map(|s| s.span()),
            Quantity::Combined => h.combined.as_ref().map(|s| s.span()),
            Quantity::HostLink => h.link.as_ref().map(|s| s.span()),
            _ => None,
        }
    };
    field(p).or_else(|| field(d))
}

impl TopologySpec {
    /// Builds the topology; `file` and `text` are the name and contents of the file
    /// this spec was parsed from (spans point into it).
    pub fn build(&self, file: &str, text: &str) -> Result<Topology, Located> {
        let c = Ctx { file, text };
        let tick = match &self.tick {
            Some(t) => Some(c.duration(t, None)?),
            None => None,
        };
        let no_defaults = HostParams::default();
        let defaults = self.defaults.as_ref().unwrap_or(&no_defaults);
        let base = host_params(&c, defaults, &no_defaults, tick)?;
        let whole = |e: TopologyError| match host_error_span(&no_defaults, defaults, &e) {
            Some(span) => Located::at(file, text, span.start, e.to_string()),
            None => Located::whole(file, e.to_string()),
        };

        let mut b = match &self.build {
            None => TopologyBuilder::new(),
            Some(shape) => {
                let sh = shape;
                let need = |v: Option<u16>, key: &str| {
                    v.ok_or_else(|| c.at(&sh.shape, format!("this shape needs `{key}`")))
                };
                let built = match *sh.shape.get_ref() {
                    ShapeKind::Crossbar => build::crossbar(need(sh.hosts, "hosts")?, &base),
                    ShapeKind::Cascade => {
                        let trunk_bw = sh.trunk.as_ref().map_or(base.link, |t| *t.get_ref());
                        if let (Some(t), true) = (&sh.trunk, trunk_bw.is_zero()) {
                            return Err(c.at(t, "trunk capacity must be greater than zero"));
                        }
                        let switches = need(sh.switches, "switches")?;
                        let hosts = need(sh.hosts_per_switch, "hosts_per_switch")?;
                        build::cascade(switches, hosts, &base, trunk_bw)
                    }
                    ShapeKind::Mesh => build::mesh(need(sh.k, "k")?, &base),
                };
                built.map_err(|e| match host_error_span(&no_defaults, defaults, &e) {
                    Some(span) => Located::at(file, text, span.start, e.to_string()),
                    None => c.at(&shape.shape, e),
                })?
            }
        };
        b.set_tick(tick).map_err(|e| match &self.tick {
            Some(t) => c.at(t, e),
            None => whole(e),
        })?;

        for s in &self.switch {
            b.add_switch(s.name.get_ref(), *s.ports.get_ref())
                .map_err(|e| match e {
                    TopologyError::NoPorts(_) => c.at(&s.ports, e),
                    _ => c.at(&s.name, e),
                })?;
        }
        for h in &self.host {
            let own = h.params();
            let p = host_params(&c, defaults, &own, tick)?;
            let attach = c.port(&b, &h.port)?;
            b.add_host(h.name.get_ref(), p.rate, p.capacity, attach, p.link, p.link)
                .map_err(|e| match e {
                    TopologyError::NoSuchPort { .. } | TopologyError::PortInUse { .. } => {
                        c.at(&h.port, e)
                    }
                    TopologyError::DuplicateName(_) => c.at(&h.name, e),
                    _ => match host_error_span(&own, defaults, &e) {
                        Some(span) => Located::at(file, text, span.start, e.to_string()),
                        None => c.at(&h.name, e),
                    },
                })?;
        }
        for l in &self.link {
            let a = c.port(&b, &l.a)?;
            let bb = c.port(&b, &l.b)?;
            let both = l.capacity.as_ref().map_or(base.link, |s| *s.get_ref());
            let ab = l.a_to_b.as_ref().map_or(both, |s| *s.get_ref());
            let ba = l.b_to_a.as_ref().map_or(both, |s| *s.get_ref());
            b.connect(a, bb, ab, ba).map_err(|e| {
                let cap_span = |dir: &Option<Spanned<Bandwidth>>| {
                    dir.as_ref().or(l.capacity.as_ref()).map(|s| s.span().start)
                };
                let at = match &e {
                    TopologyError::Zero { quantity, .. }
                    | TopologyError::OutOfRange { quantity, .. } => {
                        let own = if *quantity == Quantity::LinkOutOfA {
                            cap_span(&l.a_to_b)
                        } else {
                            cap_span(&l.b_to_a)
                        };
                        own.unwrap_or(l.a.span().start)
                    }
                    TopologyError::PortInUse { port, .. }
                    | TopologyError::NoSuchPort { port, .. }
                        if *port == bb.port && *port != a.port =>
                    {
                        l.b.span().start
                    }
                    _ => l.a.span().start,
                };
                Located::at(file, text, at, e.to_string())
            })?;
        }
        if let Some(kind) = &self.routing {
            b.set_routing(*kind.get_ref()).map_err(|e| c.at(kind, e))?;
        }
        // The line of each pair's first route, to name it when a pair comes twice.
        let mut first_route: std::collections::HashMap<_, usize> = Default::default();
        for r in &self.route {
            let src = b.node_id(r.from.get_ref()).map_err(|e| c.at(&r.from, e))?;
            let dst = b.node_id(r.to.get_ref()).map_err(|e| c.at(&r.to, e))?;
            let (line, _) = crate::source::line_of(text, r.from.span().start);
            if let Some(first) = first_route.insert((src, dst), line) {
                return Err(c.at(
                    &r.from,
                    format!(
                        "route {} -> {} is given twice (first at line {first}): \
                         one route per pair of nodes",
                        r.from.get_ref(),
                        r.to.get_ref()
                    ),
                ));
            }
            let mut hops = Vec::with_capacity(r.ports.len());
            for p in &r.ports {
                hops.push(c.port(&b, p)?);
            }
            b.add_route(src, dst, hops).map_err(|e| {
                // Point at the port at fault, else at the route's source.
                let at = match &e {
                    TopologyError::BadRoute { hop: Some(i), .. } => r.ports.get(*i),
                    _ => None,
                };
                Located::at(
                    file,
                    text,
                    at.map_or(r.from.span().start, |s| s.span().start),
                    e.to_string(),
                )
            })?;
        }
        b.build().map_err(whole)
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
