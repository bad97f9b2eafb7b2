//! BookSim2 configuration files as flit scenarios: `clusterqos run mesh.cfg` and
//! `clusterqos from-booksim mesh.cfg [KEY=VALUE ...]` read the file BookSim2 reads
//! (`key = value;` statements, `//` comments, BookSim2's defaults for every key left
//! out, `KEY=VALUE` arguments overriding the file as on BookSim2's command line) and
//! give the BookSim2-equivalent scenario (`delays = "booksim2"`: BookSim2's `iq_router`,
//! its separable input-first or iSLIP allocators and terminal; docs/flit-network.md).
//!
//! Only what that scenario reproduces is accepted, and a file is never half-read:
//! - the keys that shape the network and its traffic — topology (`mesh`, `torus`,
//!   `fly`, `fattree`), `k`, `n` (dimensions, a fly's stages or a fat tree's levels),
//!   `routing_function`
//!   (`dor`/`dim_order`, `xy_yx`, `adaptive_xy_yx`, `valiant` or `romm` on a mesh,
//!   `dim_order` on a torus — its `valiant` stops on an assertion in BookSim2 —
//!   `dest_tag` on a fly, `nca` on a fattree),
//!   `num_vcs`, `vc_buf_size`, `packet_size` and `packet_size_rate` (one size, or
//!   several with weights: `packet_size = {{1,5,20}}; packet_size_rate = {{6,3,1}};`),
//!   `traffic` (`uniform`, `transpose`, `bitcomp`, `bitrev`, `shuffle`, `tornado`,
//!   `neighbor`, `randperm` with `perm_seed` or `randperm(seed)` — BookSim2's very
//!   permutation, [`qos_sim::flit::ran_array`] — `diagonal`, `asymmetric`, `taper64`,
//!   `hotspot({{nodes},{rates}})` with named nodes, `background({{nodes}})`; the
//!   parameters split as BookSim2's `tokenize_str` splits them), `injection_process`
//!   (`bernoulli`, or `on_off` with `burst_alpha`, `burst_beta`, `burst_r1` or
//!   `on_off(alpha,beta,r1)`), `injection_rate` (in packets,
//!   or in flits with `injection_rate_uses_flits = 1`: divided by the mean packet size),
//!   `seed`, and the run's phases (`sample_period`,
//!   `warmup_periods`, `max_samples`, `latency_thres` and the four convergence
//!   thresholds; `sim_type`, `latency` or `throughput`: no stability rule, no latency
//!   convergence test, the sources stopped at the measurement's end) — are translated;
//! - `credit_delay` and `routing_delay` (BookSim2's defaults 0 and 1), `use_noc_latency`
//!   (a torus's router channels of latency 2, or 1 with 0), `input_speedup`
//!   (1 or 2), `wait_for_tail_credit` and `hold_switch_for_packet` become the router's
//!   keys of the same names, and
//!   `vc_allocator`/`sw_allocator` (both `islip` — BookSim2's default — or both
//!   `islip(N)`, N iterations, or both `separable_input_first`) its `allocator` and
//!   `alloc_iters` (BookSim2's own `alloc_iters` key does not reach its `iq_router`'s
//!   allocators, so it has no effect here either);
//! - every other key that changes what BookSim2 simulates must hold the one value the
//!   equivalent models ([`FIXED`]: BookSim2's default for each; were a default another
//!   value, leaving the key out would be refused too, with the line to write);
//! - keys that only change BookSim2's output, or settings of a mode the file does not
//!   use (the power model, watch and statistics files, `burst_*` with
//!   `injection_process = bernoulli`, read/write classes with `use_read_write = 0`), are
//!   accepted and have no effect;
//! - any other name is not a BookSim2 key, as BookSim2 itself says.
//!
//! Every refusal names the file and the line of the statement at fault (or the
//! argument), in one line.

use qos_core::source::Located;

use super::scenario::FlitScenario;
use crate::experiment::no_files;
use qos_sim::flit::config::MAX_PRIORITY_CLASSES;

/// Keys the equivalent scenario models with one value only: (key, that value, BookSim2's
/// default). A key left out takes BookSim2's default.
pub const FIXED: &[(&str, &str, &str)] = &[
    ("c", "1", "1"),
    ("subnets", "1", "1"),
    ("router", "iq", "iq"),
    ("output_delay", "0", "0"),
    ("internal_speedup", "1", "1"),
    ("output_speedup", "1", "1"),
    ("output_buffer_size", "-1", "-1"),
    ("noq", "0", "0"),
    ("speculative", "0", "0"),
    ("buf_size", "-1", "-1"),
    ("buffer_policy", "private", "private"),
    ("private_bufs", "-1", "-1"),
    ("max_held_slots", "-1", "-1"),
    ("vc_busy_when_full", "0", "0"),
    ("vc_prioritize_empty", "0", "0"),
    ("vc_priority_donation", "0", "0"),
    ("vc_shuffle_requests", "0", "0"),
    ("vc_alloc_delay", "1", "1"),
    ("sw_alloc_delay", "1", "1"),
    ("st_prepare_delay", "0", "0"),
    ("st_final_delay", "1", "1"),
    ("vct", "0", "0"),
    ("arb_type", "round_robin", "round_robin"),
    ("max_outstanding_requests", "0", "0"),
    ("use_read_write", "0", "0"),
    ("sim_count", "1", "1"),
    ("measure_stats", "1", "1"),
    ("include_queuing", "1", "1"),
    ("link_failures", "0", "0"),
    ("channel_file", "", ""),
    ("network_file", "", ""),
];

/// Keys translated into the scenario, with BookSim2's defaults.
const MODELLED: &[(&str, &str)] = &[
    ("topology", "torus"),
    ("credit_delay", "0"),
    ("use_noc_latency", "1"),
    ("routing_delay", "1"),
    ("vc_allocator", "islip"),
    ("sw_allocator", "islip"),
    ("input_speedup", "1"),
    ("wait_for_tail_credit", "0"),
    ("hold_switch_for_packet", "0"),
    ("classes", "1"),
    ("class_priority", "0"),
    ("priority", "none"),
    ("k", "8"),
    ("n", "2"),
    ("routing_function", "none"),
    ("num_vcs", "16"),
    ("vc_buf_size", "8"),
    ("packet_size", "1"),
    ("packet_size_rate", "1"),
    ("injection_process", "bernoulli"),
    ("burst_alpha", "0.5"),
    ("burst_beta", "0.5"),
    ("burst_r1", "-1"),
    ("traffic", "uniform"),
    ("perm_seed", "0"),
    ("injection_rate", "0.1"),
    ("injection_rate_uses_flits", "0"),
    ("seed", "0"),
    ("sample_period", "1000"),
    ("warmup_periods", "3"),
    ("max_samples", "10"),
    ("latency_thres", "500.0"),
    ("sim_type", "latency"),
    ("warmup_thres", "0.05"),
    ("acc_warmup_thres", "0.05"),
    ("stopping_thres", "0.05"),
    ("acc_stopping_thres", "0.05"),
];

/// BookSim2 keys with no effect on what the equivalent scenario simulates: output,
/// tracing and power-model settings, and settings of modes the accepted files do not
/// use (other topologies' shapes, speculation, batch runs, read/write
/// classes, link failures' seed).
const NO_EFFECT: &[&str] = &[
    "alloc_iters",
    "x",
    "y",
    "xr",
    "yr",
    "in_ports",
    "out_ports",
    "fail_seed",
    "spec_check_elig",
    "spec_check_cred",
    "spec_mask_by_reqs",
    "spec_sw_allocator",
    "private_buf_size",
    "private_buf_start_vc",
    "private_buf_end_vc",
    "feedback_aging_scale",
    "feedback_offset",
    "batch_size",
    "batch_count",
    "write_fraction",
    "read_request_begin_vc",
    "read_request_end_vc",
    "write_request_begin_vc",
    "write_request_end_vc",
    "read_reply_begin_vc",
    "read_reply_end_vc",
    "write_reply_begin_vc",
    "write_reply_end_vc",
    "read_request_subnet",
    "read_reply_subnet",
    "write_request_subnet",
    "write_reply_subnet",
    "read_request_size",
    "write_request_size",
    "read_reply_size",
    "write_reply_size",
    "pair_stats",
    "deadlock_warn_timeout",
    "print_activity",
    "print_csv_results",
    "viewer_trace",
    "watch_file",
    "watch_flits",
    "watch_packets",
    "watch_transactions",
    "watch_out",
    "stats_out",
    "injected_flits_out",
    "received_flits_out",
    "stored_flits_out",
    "sent_flits_out",
    "outstanding_credits_out",
    "ejected_flits_out",
    "active_packets_out",
    "used_credits_out",
    "free_credits_out",
    "max_credits_out",
    "sent_packets_out",
    "sim_power",
    "power_output_file",
    "tech_file",
    "channel_width",
    "channel_sweep",
    "H_INVD2",
    "W_INVD2",
    "H_DFQD1",
    "W_DFQD1",
    "H_ND2D1",
    "W_ND2D1",
    "H_SRAM",
    "W_SRAM",
    "Vdd",
    "R",
    "IoffSRAM",
    "IoffP",
    "IoffN",
    "Cg_pwr",
    "Cd_pwr",
    "Cgdl",
    "Cg",
    "Cd",
    "LAMBDA",
    "MetalPitch",
    "Rw",
    "Cw_gnd",
    "Cw_cpl",
    "wire_length",
];

/// Where a value came from: a statement of the file (its byte offset) or an argument.
#[derive(Debug, Clone, Copy, PartialEq)]
enum From {
    File(usize),
    Arg(usize),
    Default,
}

/// One `key = value` of the file or the arguments.
#[derive(Debug, Clone)]
struct Setting {
    value: String,
    from: From,
}

/// The file and its arguments, read: each key's last value (BookSim2: the last
/// assignment wins, the arguments after the file), in key order so that of two faults
/// the same one is always reported.
struct Cfg<'a> {
    file: &'a str,
    text: &'a str,
    args: &'a [String],
    set: std::collections::BTreeMap<String, Setting>,
}

impl Cfg<'_> {
    /// A refusal about key `key` where its value came from.
    fn at(&self, key: &str, message: String) -> Located {
        let from = self.set.get(key).map_or(From::Default, |s| s.from);
        self.at_from(from, message)
    }

    fn at_from(&self, from: From, message: String) -> Located {
        match from {
            From::File(o) => Located::at(self.file, self.text, o, message),
            From::Arg(i) => Located::whole(&format!("argument `{}`", self.args[i]), message),
            From::Default => Located::whole(self.file, message),
        }
    }

    /// The value of `key` (BookSim2's default `dflt` if unset).
    fn get<'s>(&'s self, key: &str, dflt: &'s str) -> &'s str {
        self.set.get(key).map_or(dflt, |s| s.value.as_str())
    }

    fn int(&self, key: &str, dflt: &str) -> Result<i64, Located> {
        let v = self.get(key, dflt);
        v.parse::<i64>().map_err(|_| {
            self.at(
                key,
                format!("{key} = {v}: BookSim2 reads this key as a whole number"),
            )
        })
    }

    fn positive(&self, key: &str, dflt: &str) -> Result<u64, Located> {
        match self.int(key, dflt)? {
            n if n >= 1 => Ok(n as u64),
            n => Err(self.at(key, format!("{key} = {n}: must be at least 1"))),
        }
    }

    fn float(&self, key: &str, dflt: &str) -> Result<f64, Located> {
        let v = self.get(key, dflt);
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(self.at(
                key,
                format!("{key} = {v}: BookSim2 reads this key as a number"),
            )),
        }
    }
}

/// Whether BookSim2's value `got` of a key is `want` (numbers compared as numbers:
/// `1.0` is `1`).
fn same(got: &str, want: &str) -> bool {
    got == want || matches!((got.parse::<f64>(), want.parse::<f64>()), (Ok(a), Ok(b)) if a == b)
}

/// Whether `v` is a value BookSim2's lexer reads as one (a number, a word, or a list in
/// braces, which it reads up to its last `}`: anything after that is a second value, a
/// syntax error there).
fn booksim_value(k: &str, v: &str) -> Result<(), String> {
    let word = v
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"_-./+{},()".contains(&b));
    if !word || v.starts_with('{') && !v.ends_with('}') {
        return Err(format!(
            "{k} = {v}: not a BookSim2 value (a number, a word or {{a,b,...}})"
        ));
    }
    Ok(())
}

/// Reads the `key = value;` statements of BookSim2 configuration `text` (file `file`):
/// (key, value, byte offset of the statement).
fn statements(file: &str, text: &str) -> Result<Vec<(String, String, usize)>, Located> {
    let mut out = Vec::new();
    // Comments out, offsets kept: every character of a comment becomes a space.
    let mut clean = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        match line.find("//") {
            Some(i) => {
                clean.push_str(&line[..i]);
                clean.extend(
                    line[i..]
                        .chars()
                        .map(|c| if c == '\n' { '\n' } else { ' ' }),
                );
            }
            None => clean.push_str(line),
        }
    }
    let mut start = 0;
    while start < clean.len() {
        let end = clean[start..].find(';').map(|i| start + i);
        let stmt = &clean[start..end.unwrap_or(clean.len())];
        let lead = stmt.len() - stmt.trim_start().len();
        let at = start + lead;
        let body = stmt.trim();
        if body.is_empty() {
            if end.is_none() {
                break;
            }
            start = end.unwrap_or(clean.len()) + 1;
            continue;
        }
        let Some(end) = end else {
            return Err(Located::at(
                file,
                text,
                at,
                format!("`{body}`: a statement ends with `;`"),
            ));
        };
        let Some((k, v)) = body.split_once('=') else {
            return Err(Located::at(
                file,
                text,
                at,
                format!("`{body}`: expected `key = value;`"),
            ));
        };
        let (k, v) = (k.trim(), v.trim());
        let word = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-./+{},()".contains(&b))
        };
        if !word(k) || k.contains(['{', '}', ',', '(', ')']) {
            return Err(Located::at(file, text, at, format!("`{k}`: not a key")));
        }
        if v.contains('\n') {
            return Err(Located::at(
                file,
                text,
                at,
                format!("`{k} = ...`: a statement ends with `;` (missing at the end of this line)"),
            ));
        }
        if let Err(m) = booksim_value(k, v) {
            return Err(Located::at(file, text, at, m));
        }
        out.push((k.to_string(), v.to_string(), at));
        start = end + 1;
    }
    Ok(out)
}

/// The scenario equivalent to BookSim2 configuration `text` (named `file`) with
/// `args` (`KEY=VALUE`, as on BookSim2's command line after the file): its TOML text,
/// checked as `clusterqos run` checks a scenario. The scenario's sweep is the one rate
/// of `injection_rate`, or `rates` when given.
pub fn scenario(
    file: &str,
    text: &str,
    args: &[String],
    rates: Option<&[f64]>,
) -> Result<String, Located> {
    scenario_with(file, text, args, rates, |path| {
        crate::experiment::read_beside(file, path)
    })
}

/// [`scenario`], the files the configuration names (an `anynet`'s `network_file`)
/// fetched with `read`, called with the path as written and returning the file's name
/// and text, or why not.
pub fn scenario_with(
    file: &str,
    text: &str,
    args: &[String],
    rates: Option<&[f64]>,
    read: impl FnOnce(&str) -> Result<(String, String), String>,
) -> Result<String, Located> {
    let mut cfg = Cfg {
        file,
        text,
        args,
        set: Default::default(),
    };
    let known = |k: &str| {
        FIXED.iter().any(|f| f.0 == k)
            || MODELLED.iter().any(|m| m.0 == k)
            || NO_EFFECT.contains(&k)
    };
    // The file's statements, then the arguments (BookSim2 reads them after the file).
    let mut given: Vec<(String, String, From)> = statements(file, text)?
        .into_iter()
        .map(|(k, v, at)| (k, v, From::File(at)))
        .collect();
    for (i, a) in args.iter().enumerate() {
        let Some((k, v)) = a.split_once('=') else {
            return Err(cfg.at_from(
                From::Arg(i),
                "expected KEY=VALUE, as on BookSim2's command line".to_string(),
            ));
        };
        let (k, v) = (k.trim(), v.trim());
        if let Err(m) = booksim_value(k, v) {
            return Err(cfg.at_from(From::Arg(i), m));
        }
        given.push((k.to_string(), v.to_string(), From::Arg(i)));
    }
    for (k, value, from) in given {
        if !known(&k) {
            return Err(cfg.at_from(from, format!("{k}: not a BookSim2 configuration key")));
        }
        cfg.set.insert(k, Setting { value, from });
    }
    let classes = cfg.positive("classes", modelled_default("classes"))? as usize;
    if classes > MAX_PRIORITY_CLASSES {
        let m = format!("classes = {classes}: the equivalent network has 1-{MAX_PRIORITY_CLASSES}");
        return Err(cfg.at("classes", m));
    }
    // Keys BookSim2 reads per class: more values than classes would go unused.
    for k in PER_CLASS.iter().chain(ONE_FOR_ALL_CLASSES) {
        let Some(s) = cfg.set.get(*k) else { continue };
        let n = booksim_tokens(&s.value).len();
        if n > classes {
            let m = format!(
                "{k} = {}: BookSim2 reads one value per traffic class, and with classes = \
                 {classes} it would use the first {classes} of these {n} and ignore the rest{}",
                s.value,
                if PER_CLASS_LISTS.contains(k) {
                    " (several packet sizes of one class are written {{a,b,...}})"
                } else {
                    ""
                }
            );
            return Err(cfg.at_from(s.from, m));
        }
    }
    // A key read per class that the network has once: every class's value the same.
    // Any other vector (`{a,b}`) has one element.
    let mut unbrace = Vec::new();
    for (k, s) in &cfg.set {
        let v = &s.value;
        if PER_CLASS.contains(&k.as_str()) {
            continue;
        }
        if ONE_FOR_ALL_CLASSES.contains(&k.as_str()) && v.starts_with('{') {
            let vals = per_class_values(v, classes);
            if vals.iter().any(|x| x.trim() != vals[0].trim()) {
                let m = format!(
                    "{k} = {v}: one value for every class is modelled (the run's phases and \
                     stability rule are the network's)"
                );
                return Err(cfg.at_from(s.from, m));
            }
            if let Some(first) = vals.first() {
                unbrace.push((k.clone(), first.trim().to_string()));
            }
            continue;
        }
        if let Some(inner) = v.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
            if inner.contains(',') && !NO_EFFECT.contains(&k.as_str()) {
                return Err(cfg.at_from(
                    s.from,
                    format!("{k} = {v}: one value per key (one traffic class) is modelled"),
                ));
            }
            unbrace.push((k.clone(), inner.to_string()));
        }
    }
    for (k, v) in unbrace {
        if let Some(s) = cfg.set.get_mut(&k) {
            s.value = v;
        }
    }
    let cmesh = cfg.get("topology", modelled_default("topology")) == "cmesh";
    let flatfly = cfg.get("topology", modelled_default("topology")) == "flatfly";
    let anynet = cfg.get("topology", modelled_default("topology")) == "anynet";
    for &(k, want, dflt) in FIXED {
        if k == "c" && (cmesh || flatfly) {
            // A concentrated mesh's and a flattened butterfly's own key, read with its
            // shape below.
            continue;
        }
        if k == "network_file" && anynet {
            // An anynet's listing, read below.
            continue;
        }
        let got = cfg.get(k, dflt);
        if same(got, want) {
            continue;
        }
        let m = if cfg.set.contains_key(k) {
            format!("{k} = {got}: the BookSim2-equivalent network models {k} = {want} only")
        } else {
            format!(
                "{k} is not set, so BookSim2 takes its default {k} = {dflt}; the \
                 BookSim2-equivalent network models {k} = {want} only: write `{k} = {want};`"
            )
        };
        return Err(cfg.at(k, m));
    }

    let dflt = modelled_default;
    let k = cfg.positive("k", dflt("k"))?;
    let topology = cfg.get("topology", dflt("topology")).to_string();
    let dims = cfg.positive("n", dflt("n"))?;
    if dims > qos_sim::flit::topology::MAX_DIMS as u64
        && !matches!(topology.as_str(), "fly" | "fattree")
    {
        let m = format!(
            "n = {dims}: the equivalent network has 1-{} dimensions",
            qos_sim::flit::topology::MAX_DIMS
        );
        return Err(cfg.at("n", m));
    }
    let most = qos_sim::flit::validate::MAX_ROUTERS as u64;
    if !anynet && k.checked_pow(dims as u32).is_none_or(|r| r > most) {
        let m = format!("k = {k}, n = {dims}: {k}^{dims} routers, at most {most}");
        return Err(cfg.at(if cfg.set.contains_key("n") { "n" } else { "k" }, m));
    }
    if cmesh {
        cmesh_shape(&cfg, k, dims)?;
    }
    let conc = if flatfly {
        flatfly_shape(&cfg, k, dims)?
    } else if cmesh {
        4
    } else {
        1
    };
    let routing = cfg.get("routing_function", dflt("routing_function"));
    match (topology.as_str(), routing) {
        ("mesh", "dor" | "dim_order" | "xy_yx" | "adaptive_xy_yx" | "valiant" | "romm")
        | ("torus", "dim_order")
        | ("fly", "dest_tag")
        | ("fattree", "nca")
        | ("cmesh", "dor_no_express" | "xy_yx_no_express")
        | ("flatfly", "ran_min" | "xyyx" | "adaptive_xyyx" | "valiant" | "ugal")
        | ("anynet", "min") => {}
        ("anynet", r) => {
            let m = format!(
                "routing_function = {r}: on an anynet BookSim2 routes by `min` (its \
                 `min_anynet`: one shortest path per pair, from its routing table)"
            );
            return Err(cfg.at("routing_function", m));
        }
        ("cmesh", "dor") if k % 2 == 0 => {}
        ("cmesh", "dor") => {
            let m = format!(
                "routing_function = dor with k = {k}: on a cmesh of odd side BookSim2 wires \
                 the express channels inconsistently (one router's into two routers), so the \
                 equivalent network takes them on an even side only; `dor_no_express` routes \
                 without them"
            );
            return Err(cfg.at("routing_function", m));
        }
        ("flatfly", r) => {
            let m = format!(
                "routing_function = {r}: on a flatfly the BookSim2-equivalent network routes \
                 by `ran_min` (BookSim2's `min_flatfly`: X, then Y, one hop each), `xyyx` \
                 (X or Y first at random, each on its half of the VCs) or `adaptive_xyyx` \
                 (the order by the first router's credits in use), `valiant` (through \
                 the router of a random intermediate node) or `ugal` (minimal or through \
                 such a router by the first router's credits in use); its ugal_xyyx and \
                 ugal_pni are not modelled"
            );
            return Err(cfg.at("routing_function", m));
        }
        ("cmesh", r) => {
            let m = if r == "xy_yx" {
                "routing_function = xy_yx: BookSim2's `xy_yx_cmesh` takes the express \
                 channels more than one router from the target coordinate (its `cmesh_xy` \
                 and `cmesh_yx`), whatever k, and is not modelled; the equivalent network \
                 models `dor`, `dor_no_express` and `xy_yx_no_express`"
                    .to_string()
            } else {
                format!(
                    "routing_function = {r}: on a cmesh the BookSim2-equivalent network routes \
                     by `dor_no_express` or `xy_yx_no_express`"
                )
            };
            return Err(cfg.at("routing_function", m));
        }
        ("fattree", r) => {
            let m = format!(
                "routing_function = {r}: on a fattree the BookSim2-equivalent network routes \
                 to the nearest common ancestor, up through a random port (`nca`)"
            );
            return Err(cfg.at("routing_function", m));
        }
        ("torus", "valiant") => {
            let m = "routing_function = valiant on a torus: BookSim2's `valiant_torus` leaves \
                     its ring partition unset when a packet goes straight through a router and \
                     stops on its assertion (`ring_part == 1`, routefunc.cpp), so there is no \
                     BookSim2 network to be equivalent to; a scenario can still route so \
                     (topology = { kind = \"torus\", routing = \"valiant\" })"
                .to_string();
            return Err(cfg.at("routing_function", m));
        }
        ("fly", r) => {
            let m = format!(
                "routing_function = {r}: on a fly the BookSim2-equivalent network routes by \
                 destination tag only (`dest_tag`)"
            );
            return Err(cfg.at("routing_function", m));
        }
        ("mesh" | "torus", r) => {
            let m = format!(
                "routing_function = {r}: on a {topology} the BookSim2-equivalent network \
                 routes by dimension order only ({})",
                if topology == "mesh" {
                    "`dor` or `dim_order`; `xy_yx`, ascending or descending per packet \
                     (`adaptive_xy_yx`: by the first router's credits); `valiant` or `romm`, \
                     through a random intermediate node"
                } else {
                    "`dim_order`"
                }
            );
            return Err(cfg.at("routing_function", m));
        }
        (t, _) => {
            let m = format!(
                "topology = {t}: the BookSim2-equivalent network is a mesh, a torus, a cmesh, \
                 a flatfly, a fly, a fattree or an anynet"
            );
            return Err(cfg.at("topology", m));
        }
    }
    // A cmesh's `dor` takes its express channels; its routings by the names of the
    // mesh's.
    let express = cmesh && routing == "dor";
    let routing = match routing {
        "dor_no_express" => "dor",
        "xy_yx_no_express" | "xyyx" => "xy_yx",
        "adaptive_xyyx" => "adaptive_xy_yx",
        "ran_min" => "dor",
        r => r,
    };
    let vcs = cfg.positive("num_vcs", dflt("num_vcs"))?;
    if matches!(
        routing,
        "xy_yx" | "adaptive_xy_yx" | "valiant" | "romm" | "ugal"
    ) && vcs < 2
    {
        let half = if routing.ends_with("xy_yx") {
            "dimension order"
        } else {
            "phase"
        };
        let m = format!(
            "routing_function = {routing} with num_vcs = {vcs}: each {half} takes half of \
             the VCs, so it needs two or more (BookSim2 stops on its assertion)"
        );
        return Err(cfg.at("routing_function", m));
    }
    if vcs > 16 {
        let m = format!(
            "num_vcs = {vcs}: the equivalent network has at most 16 VCs (an IBA port's 16 \
             virtual lanes)"
        );
        return Err(cfg.at("num_vcs", m));
    }
    if topology == "torus" && vcs < 2 {
        let m = format!(
            "num_vcs = {vcs}: on a torus BookSim2's dim_order_torus splits the VCs into two \
             halves at the dateline, so the equivalent network needs at least 2: write \
             `num_vcs = 2;` or more"
        );
        return Err(cfg.at("num_vcs", m));
    }
    let mut router_extra = String::new();
    for (key, most, normal) in [("credit_delay", 61, 1), ("routing_delay", 1_000, 0)] {
        let v = cfg.int(key, dflt(key))?;
        if !(0..=most).contains(&v) {
            let m = format!("{key} = {v}: 0-{most} cycles in the equivalent network");
            return Err(cfg.at(key, m));
        }
        if v != normal {
            router_extra.push_str(&format!("{key} = {v}\n"));
        }
    }
    // `islip` or `islip(N)`: iSLIP with N iterations (BookSim2's iq_router takes them
    // from the name alone; its `alloc_iters` key does not reach the router).
    let alloc = |key: &str| -> Result<(bool, i64), Located> {
        let a = cfg.get(key, dflt(key));
        let iters = a
            .strip_prefix("islip(")
            .and_then(|r| r.strip_suffix(')'))
            .map(|n| n.trim().parse::<i64>());
        match (a, iters) {
            ("separable_input_first", _) => Ok((false, 1)),
            ("islip", _) => Ok((true, 1)),
            (_, Some(Ok(n))) if (1..=16).contains(&n) => Ok((true, n)),
            _ => Err(cfg.at(
                key,
                format!(
                    "{key} = {a}: the BookSim2-equivalent network models the islip (or \
                     islip(N), N = 1-16 iterations) and separable_input_first allocators"
                ),
            )),
        }
    };
    let (va, sa) = (alloc("vc_allocator")?, alloc("sw_allocator")?);
    if va != sa {
        let m = format!(
            "sw_allocator = {} with vc_allocator = {}: the BookSim2-equivalent network \
             models both allocators of one kind (both islip with the same iterations, or \
             both separable_input_first)",
            cfg.get("sw_allocator", dflt("sw_allocator")),
            cfg.get("vc_allocator", dflt("vc_allocator"))
        );
        return Err(cfg.at("sw_allocator", m));
    }
    if va.0 {
        router_extra.push_str("allocator = \"islip\"\n");
        if va.1 != 1 {
            router_extra.push_str(&format!("alloc_iters = {}\n", va.1));
        }
    }
    // Switches of BookSim2's router, each the router key of the same name.
    for key in ["wait_for_tail_credit", "hold_switch_for_packet"] {
        match cfg.int(key, dflt(key))? {
            0 => {}
            1 => router_extra.push_str(&format!("{key} = true\n")),
            n => return Err(cfg.at(key, format!("{key} = {n}: 0 or 1"))),
        }
    }
    // BookSim2's `use_noc_latency`: a torus's and a cmesh's router channels of latency 2,
    // a flatfly's of their length (1) or 1 (0); every other topology's are 1 either way,
    // so it is written for those only.
    match cfg.int("use_noc_latency", dflt("use_noc_latency"))? {
        1 => {}
        0 if topology == "torus" || cmesh || flatfly => {
            router_extra.push_str("use_noc_latency = false\n")
        }
        0 => {}
        n => return Err(cfg.at("use_noc_latency", format!("use_noc_latency = {n}: 0 or 1"))),
    }
    let speedup = cfg.int("input_speedup", dflt("input_speedup"))?;
    if !(1..=2).contains(&speedup) {
        let m = format!(
            "input_speedup = {speedup}: the equivalent network models 1 or 2 crossbar inputs per port"
        );
        return Err(cfg.at("input_speedup", m));
    }
    if speedup != 1 {
        router_extra.push_str(&format!("input_speedup = {speedup}\n"));
    }
    let buffer = cfg.positive("vc_buf_size", dflt("vc_buf_size"))?;
    // An anynet's listing: its lines as the scenario's, checked now.
    let listing = if anynet {
        let path = cfg.get("network_file", "");
        if path.is_empty() {
            let m = "topology = anynet without network_file: BookSim2 reads the network \
                     from the file it names (`network_file = FILE;`)"
                .to_string();
            return Err(cfg.at("topology", m));
        }
        let (_, body) = read(path)
            .map_err(|m| cfg.at("network_file", format!("network_file = {path}: {m}")))?;
        let lines: Vec<String> = body.lines().map(|l| l.trim_end().to_string()).collect();
        let net = qos_sim::flit::anynet::AnyNet::parse(&lines)
            .map_err(|m| cfg.at("network_file", format!("network_file = {path}: {m}")))?;
        Some((path.to_string(), lines, net))
    } else {
        None
    };
    let nodes = match &listing {
        Some((_, _, net)) => Some(net.nodes as u64),
        None => k
            .checked_pow(dims as u32)
            .map(|r| conc * r)
            .filter(|&n| n <= 1 << 16),
    };
    let rule = cfg.get("priority", dflt("priority"));
    if !matches!(rule, "none" | "class" | "age") {
        let m = format!(
            "priority = {rule}: the equivalent network models the priorities none, class and \
             age (a packet's, from its creation: `network_age`, `local_age`, `queue_length`, \
             `hop_count` and `sequence` change along the way or per flit)"
        );
        return Err(cfg.at("priority", m));
    }
    if rule != "none" {
        router_extra.push_str(&format!("priority = \"{rule}\"\n"));
    }
    let sweeping = rates.is_some_and(|r| r.len() > 1);
    let mut per_class = Vec::with_capacity(classes);
    for c in 0..classes {
        per_class.push(class_of(
            &cfg.for_class(c, classes),
            nodes,
            k,
            dims,
            rule,
            sweeping,
        )?);
    }
    let seed_text = cfg.get("seed", dflt("seed"));
    let seed = seed_text.parse::<u64>().map_err(|_| {
        cfg.at(
            "seed",
            format!("seed = {seed_text}: a whole number (runs here are reproducible: no `time`)"),
        )
    })?;
    let period = cfg.positive("sample_period", dflt("sample_period"))?;
    let warmups = cfg.int("warmup_periods", dflt("warmup_periods"))?;
    let samples = cfg.positive("max_samples", dflt("max_samples"))?;
    if warmups < 0 || warmups as u64 >= samples {
        let m = format!(
            "warmup_periods = {warmups} with max_samples = {samples}: BookSim2 measures \
             nothing unless 0 <= warmup_periods < max_samples"
        );
        return Err(cfg.at("warmup_periods", m));
    }
    let warmups = warmups as u64;
    let thres = cfg.float("latency_thres", dflt("latency_thres"))?;
    let conv: Vec<f64> = [
        "warmup_thres",
        "acc_warmup_thres",
        "stopping_thres",
        "acc_stopping_thres",
    ]
    .iter()
    .map(|k| cfg.float(k, dflt(k)))
    .collect::<Result<_, _>>()?;

    // BookSim2 warms up for `warmup_periods` sample periods (with 0, until the period
    // converges) and measures until three periods converge or `max_samples` periods,
    // warm-up included, have run. It drains without a bound; the scenario gives the
    // drain as long as the measurement (the shipped equivalents' rule).
    let (warmup, measure) = if warmups == 0 {
        (0, period * samples)
    } else {
        (period * warmups, period * (samples - warmups))
    };
    // `sim_type = throughput`: BookSim2 neither aborts on `latency_thres` nor tests
    // the latency's convergence, and at the measurement's end its terminals stop and
    // the network drains (`stop_sources`).
    let throughput = match cfg.get("sim_type", dflt("sim_type")) {
        "latency" => false,
        "throughput" => true,
        t => {
            let m = format!(
                "sim_type = {t}: the equivalent network runs BookSim2's latency and throughput \
                 simulations (`batch` runs are not modelled)"
            );
            return Err(cfg.at("sim_type", m));
        }
    };
    let abort = if throughput {
        "false".to_string()
    } else {
        toml_float(thres)
    };
    let mut phases = format!(
        "warmup = {warmup}, measure = {measure}, drain_max = {measure}, abort_latency = {abort}, \
         sample_period = {period}"
    );
    if warmups == 0 {
        phases.push_str(", warmup_converge = true");
    }
    for (k, v) in [
        "warmup_thres",
        "acc_warmup_thres",
        "stopping_thres",
        "acc_stopping_thres",
    ]
    .iter()
    .zip(&conv)
    {
        let v = if throughput && !k.starts_with("acc_") {
            -1.0
        } else {
            *v
        };
        if v != 0.05 {
            phases.push_str(&format!(", {k} = {}", toml_float(v)));
        }
    }
    if throughput {
        phases.push_str(", stop_sources = true");
    }
    // The sweep: the given rates for every class, else each class's own rate (no sweep
    // when the classes' rates differ).
    let rates = match rates {
        Some(r) => Some(r.to_vec()),
        None if per_class.iter().all(|c| c.rate == per_class[0].rate) => {
            Some(vec![per_class[0].rate])
        }
        None => None,
    };
    let name = std::path::Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("booksim");
    let vls: Vec<String> = (0..vcs).map(|v| v.to_string()).collect();
    let with_args = if args.is_empty() {
        String::new()
    } else {
        format!(" with {}", args.join(" "))
    };
    let dims_text = if dims == 2 {
        String::new()
    } else {
        format!(", n = {dims}")
    };
    let split = matches!(
        routing,
        "xy_yx" | "adaptive_xy_yx" | "valiant" | "romm" | "ugal"
    );
    let n_text = format!(
        "{dims_text}{}",
        if split {
            format!(", {routing} routing")
        } else {
            String::new()
        }
    );
    let n_key = format!(
        "{}{}",
        if flatfly {
            format!(", c = {conc}")
        } else if express {
            ", express = true".to_string()
        } else {
            dims_text.clone()
        },
        if split {
            format!(", routing = \"{routing}\"")
        } else {
            String::new()
        }
    );
    let one = classes == 1;
    let class_name = |c: usize| {
        if one {
            "data".to_string()
        } else {
            format!("class{c}")
        }
    };
    let traffic_text = if one {
        per_class[0].describe()
    } else {
        let each: Vec<String> = per_class
            .iter()
            .enumerate()
            .map(|(c, x)| format!("{} {}", class_name(c), x.describe()))
            .collect();
        let by = match rule {
            "class" => "class priority",
            "age" => "packet age",
            _ => "no priority",
        };
        format!(
            "{classes} classes sharing the VCs, ranked by {by}: {}",
            each.join("; ")
        )
    };
    let mut class_blocks = String::new();
    for (c, x) in per_class.iter().enumerate() {
        class_blocks.push_str(&format!(
            "\n[[network.classes]]\n\
             name = \"{}\"\n\
             vls = [{}]\n\
             {}packet_flits = {}\n\
             {}\
             rate = {:?}\n\
             process = {}\n\
             pattern = {{ kind = \"{}\"{} }}\n",
            class_name(c),
            vls.join(", "),
            if x.priority != 0 {
                format!("priority = {}\n", x.priority)
            } else {
                String::new()
            },
            x.mix[0].0,
            x.mix_key(),
            x.rate,
            x.process_key(),
            x.pattern,
            x.pattern_keys,
        ));
    }
    let sweep = match &rates {
        None => String::new(),
        Some(rates) => {
            let rate_list: Vec<String> = rates.iter().map(|r| format!("{r:?}")).collect();
            let who = if one {
                "class = \"data\"".to_string()
            } else {
                let names: Vec<String> = (0..classes)
                    .map(|c| format!("\"{}\"", class_name(c)))
                    .collect();
                format!("classes = [{}]", names.join(", "))
            };
            format!("\n[sweep]\n{who}\nrates = [{}]\n", rate_list.join(", "))
        }
    };
    let kind = if topology == "fattree" {
        "fat_tree"
    } else {
        topology.as_str()
    };
    // The topology: an inline table, or an anynet's listing as a table of its own.
    let (topology_line, topology_table, shape) = match &listing {
        Some((path, lines, net)) => {
            let quoted: Vec<String> = lines
                .iter()
                .filter(|l| !l.trim().is_empty())
                .map(|l| format!("  {:?},\n", l.trim()))
                .collect();
            (
                String::new(),
                format!(
                    "\n# BookSim2's anynet listing ({path}): its lines.\n\
                     [network.topology]\n\
                     kind = \"anynet\"\n\
                     network = [\n{}]\n",
                    quoted.concat()
                ),
                format!(
                    "anynet {path} ({} routers, {} nodes)",
                    net.routers(),
                    net.nodes
                ),
            )
        }
        None => (
            format!("topology = {{ kind = \"{kind}\", k = {k}{n_key} }}\n"),
            String::new(),
            format!("{topology} k = {k}{n_text}"),
        ),
    };
    let text_out = format!(
        "# The BookSim2-equivalent network of BookSim2 configuration {file}{with_args}\n\
         # (clusterqos from-booksim; docs/flit-network.md lists what differs).\n\
         model = \"flit\"\n\
         name = {name:?}\n\
         description = \"BookSim2 configuration {file}: {shape}, {vcs} VCs x {buffer} \
         flits, {traffic_text}; BookSim2's router, allocators and \
         terminal.\"\n\
         \n\
         [network]\n\
         {topology_line}\
         seed = {seed}\n\
         phases = {{ {phases} }}\n\
         {topology_table}\
         \n\
         [network.router]\n\
         buffer = {buffer}\n\
         delays = \"booksim2\"\n\
         {router_extra}\
         {class_blocks}\
         {sweep}",
    );
    // The scenario's own checks (lanes, buffer, pattern against the node count, ...),
    // reported at the BookSim2 key the offending scenario line came from.
    if let Err(e) = FlitScenario::parse(file, &text_out, no_files) {
        let loc = match e {
            super::scenario::ScenarioError::Parse(l) => l,
            other => Located::whole(file, other.to_string()),
        };
        let line = loc
            .line
            .and_then(|l| text_out.lines().nth(l - 1))
            .unwrap_or("");
        let key = [
            ("vls", "num_vcs"),
            ("buffer", "vc_buf_size"),
            ("packet_flits", "packet_size"),
            ("packet_mix", "packet_size"),
            ("process", "injection_process"),
            ("pattern", "traffic"),
            ("topology", "k"),
            ("rate", "injection_rate"),
            ("phases", "sample_period"),
            ("priority = \"", "priority"),
            ("priority", "class_priority"),
        ]
        .iter()
        .find(|(ours, _)| line.starts_with(ours))
        .map_or("topology", |(_, theirs)| theirs);
        return Err(cfg.at(key, format!("{}: {}", key, loc.message)));
    }
    Ok(text_out)
}

/// BookSim2's `traffic` value as the scenario's pattern: its kind, and the keys after
/// `kind` (`, nodes = [...]`, ...) for the patterns with parameters.
fn traffic<'c>(cfg: &Cfg<'_>, value: &'c str) -> Result<(&'c str, String), Located> {
    // `TrafficPattern::New`: the name up to `(`, the parameters up to the last `)`
    // split by BookSim2's `tokenize_str`.
    let (name, params) = match value.find('(') {
        None => (value, Vec::new()),
        Some(l) => {
            let inner = match value.rfind(')') {
                Some(r) if r > l => &value[l + 1..r],
                _ => &value[l + 1..],
            };
            (&value[..l], booksim_tokens(inner))
        }
    };
    let refuse = |m: String| Err(cfg.at("traffic", format!("traffic = {value}: {m}")));
    let list = |v: &[i64]| {
        let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        items.join(", ")
    };
    let plain = match name {
        "uniform" => "uniform",
        "transpose" => "transpose",
        "bitcomp" => "bit_complement",
        "bitrev" => "bit_reverse",
        "shuffle" => "shuffle",
        "tornado" => "tornado",
        "neighbor" => "neighbor",
        "diagonal" => "diagonal",
        "asymmetric" => "asymmetric",
        "taper64" => "taper64",
        "hotspot" => {
            // BookSim2 draws a hotspot of -1 (or of no parameter) from its own
            // generator, which this network does not share.
            let nodes = params.first().map(|p| booksim_ints(p)).unwrap_or_default();
            if nodes.is_empty() || nodes.iter().any(|&n| n < 0) {
                return refuse(
                    "BookSim2 draws an unnamed hotspot (-1, or none given) from its own \
                     random generator; name the nodes: hotspot({{a,b},{rate_a,rate_b}})"
                        .into(),
                );
            }
            let mut rates = params.get(1).map(|p| booksim_ints(p)).unwrap_or_default();
            if params.len() >= 2 && rates.is_empty() {
                return refuse("the hotspot rates are an empty list".into());
            }
            let last = rates.last().copied().unwrap_or(1);
            rates.resize(nodes.len(), last);
            if rates.iter().any(|&r| r <= 0 || r > 65_535) {
                return refuse(format!(
                    "hotspot rates {}: each a whole number from 1 to 65535",
                    list(&rates)
                ));
            }
            let weights = if rates.iter().all(|&r| r == rates[0]) {
                String::new()
            } else {
                format!(", weights = [{}]", list(&rates))
            };
            return Ok((
                "hotspot",
                format!(", nodes = [{}], fraction = 1.0{weights}", list(&nodes)),
            ));
        }
        "randperm" => {
            // `randperm(S)`, else the `perm_seed` key; BookSim2 reads both as whole
            // numbers (the parameter with `atoi`, the key strictly).
            let seed = match params.first() {
                Some(p) => atoi(p),
                None => {
                    let v = cfg.get("perm_seed", modelled_default("perm_seed"));
                    v.parse::<i64>().map_err(|_| {
                        cfg.at(
                            "perm_seed",
                            format!(
                                "perm_seed = {v}: a whole number (runs here are reproducible: \
                                 no `time`)"
                            ),
                        )
                    })?
                }
            };
            return Ok(("randperm", format!(", seed = {seed}")));
        }
        "background" => {
            let Some(p) = params.first() else {
                return refuse("background needs its excluded nodes: background({{a,b}})".into());
            };
            let excluded = booksim_ints(p);
            if excluded.iter().any(|&n| n < 0) {
                return refuse(format!(
                    "excluded nodes {}: nodes are 0 or more",
                    list(&excluded)
                ));
            }
            return Ok(("background", format!(", excluded = [{}]", list(&excluded))));
        }
        _ => {
            return refuse(
                "the BookSim2-equivalent network generates uniform, transpose, bitcomp, \
                 bitrev, shuffle, tornado, neighbor, randperm, diagonal, asymmetric, \
                 taper64, hotspot and background traffic"
                    .into(),
            )
        }
    };
    if !params.is_empty() || value.contains('(') {
        return refuse(format!(
            "{name} takes no parameters here (the network's own k and n are used)"
        ));
    }
    Ok((plain, String::new()))
}

/// BookSim2's `tokenize_str` (config_utils.cpp), quirks included: a value that does not
/// start with `{` is one element; otherwise the elements end at the commas and closing
/// braces outside nested braces, so `{{0,9},{1,2}}` gives `{0,9}` and `{1,2}` but
/// `{0,9},{1,2}` gives `0` and `9`.
fn booksim_tokens(data: &str) -> Vec<&str> {
    if data.is_empty() {
        return Vec::new();
    }
    if !data.starts_with('{') {
        return vec![data];
    }
    let (mut out, mut start, mut nested) = (Vec::new(), 1, 0);
    for (at, c) in data.char_indices().skip(1) {
        match c {
            '{' => nested += 1,
            '}' if nested > 0 => nested -= 1,
            ',' | '}' if nested == 0 => {
                if at > start {
                    out.push(&data[start..at]);
                }
                start = at + 1;
            }
            _ => {}
        }
    }
    out
}

/// BookSim2's `tokenize_int`: [`booksim_tokens`], each read as C's `atoi` does (the
/// leading whole number, 0 if none).
fn booksim_ints(data: &str) -> Vec<i64> {
    booksim_tokens(data).into_iter().map(atoi).collect()
}

/// C's `atoi`: optional blanks and sign, then the digits up to the first other
/// character (0 without a digit; saturating instead of C's undefined overflow).
fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let v = digits
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |v, d| {
            v.saturating_mul(10).saturating_add((d - b'0') as i64)
        });
    if neg {
        -v
    } else {
        v
    }
}

/// The shape keys of a `cmesh` (`k` routers per side, `n` dimensions): BookSim2's
/// `CMesh` asserts `n <= 2`, `c == 4`, `x == y`, `xr == yr` and `c == xr * yr`, and the
/// equivalent network is its two-dimensional mesh of 2×2 blocks; its defaults (`c = 1`,
/// `xr = yr = 1`) stop BookSim2 on those assertions, so they are written out.
fn cmesh_shape(cfg: &Cfg<'_>, k: u64, dims: u64) -> Result<(), Located> {
    if dims != 2 {
        let m =
            format!("n = {dims}: a cmesh is two-dimensional here (BookSim2's is broken for n > 2)");
        return Err(cfg.at("n", m));
    }
    for (key, want, dflt) in [("c", 4, "1"), ("xr", 2, "1"), ("yr", 2, "1")] {
        let v = cfg.int(key, dflt)?;
        if v != want {
            let m = format!(
                "{key} = {v}: BookSim2's cmesh has four nodes per router (c = 4, xr = yr = 2; it \
                 stops on its assertions otherwise): write `{key} = {want};`"
            );
            return Err(cfg.at(key, m));
        }
    }
    let (x, y) = (cfg.int("x", "8")?, cfg.int("y", "8")?);
    if x != y {
        let m = format!("y = {y} with x = {x}: BookSim2's cmesh is square (x = y)");
        return Err(cfg.at("y", m));
    }
    if !(2..=128).contains(&k) {
        let m = format!("k = {k}: a cmesh has 2-128 routers per side here (4k² nodes)");
        return Err(cfg.at("k", m));
    }
    Ok(())
}

/// The shape keys of a `flatfly` (`k` routers per side, `n` dimensions), returning its
/// nodes per router: BookSim2's `FlatFlyOnChip` asserts `x == y`, `xr == yr` and `c ==
/// xr * yr`, lays its nodes out on a grid of `x` routers per side (which must be `k`:
/// its routing reads the router numbers base `k`) and is two-dimensional in that
/// layout; the equivalent network takes 1, 4 or 9 nodes per router (`xr` = 1-3, whose
/// injection channels all take one cycle).
fn flatfly_shape(cfg: &Cfg<'_>, k: u64, dims: u64) -> Result<u64, Located> {
    if dims != 2 {
        let m = format!(
            "n = {dims}: a flatfly is two-dimensional here (BookSim2 lays its routers and \
             nodes out on an x-by-y grid)"
        );
        return Err(cfg.at("n", m));
    }
    let (xr, yr, c) = (cfg.int("xr", "1")?, cfg.int("yr", "1")?, cfg.int("c", "1")?);
    if yr != xr {
        let m = format!("yr = {yr} with xr = {xr}: BookSim2's flatfly has xr = yr");
        return Err(cfg.at("yr", m));
    }
    if !(1..=3).contains(&xr) {
        let m = format!(
            "xr = {xr}: the equivalent flatfly has 1-3 nodes per router along each side \
             (from 4 on BookSim2's injection channels differ in length)"
        );
        return Err(cfg.at("xr", m));
    }
    if c != xr * yr {
        let m = format!(
            "c = {c}: BookSim2's flatfly has c = xr * yr = {} nodes per router",
            xr * yr
        );
        return Err(cfg.at("c", m));
    }
    for key in ["x", "y"] {
        let v = cfg.int(key, "8")?;
        if v as u64 != k {
            let m = format!(
                "{key} = {v} with k = {k}: BookSim2's flatfly places its nodes on {key} routers \
                 per side and routes on k, so the two must be equal: write `{key} = {k};`"
            );
            return Err(cfg.at(key, m));
        }
    }
    if k < 2 || c as u64 + 2 * (k - 1) > 64 {
        let m = format!(
            "k = {k}: a flatfly has 2 or more routers per side here, and c + 2(k - 1) ports \
             per router at most 64"
        );
        return Err(cfg.at("k", m));
    }
    Ok(c as u64)
}

/// BookSim2's default of a translated key ([`MODELLED`]).
fn modelled_default(key: &str) -> &'static str {
    MODELLED.iter().find(|m| m.0 == key).map_or("", |m| m.1)
}

/// Keys whose value is BookSim2's per-class list of lists (`{{1,5,20}}`: class 0's
/// packet sizes), read by [`packet_sizes`].
const PER_CLASS_LISTS: &[&str] = &["packet_size", "packet_size_rate"];

/// Keys BookSim2 reads per traffic class, each modelled per class: a vector `{a,b}` is
/// one value per class, the last standing for the classes after it.
const PER_CLASS: &[&str] = &[
    "injection_rate",
    "traffic",
    "class_priority",
    "injection_process",
    "packet_size",
    "packet_size_rate",
];

/// Keys BookSim2 reads per traffic class that the equivalent network has once (its
/// phases and stability rule): every class must have the same value.
const ONE_FOR_ALL_CLASSES: &[&str] = &[
    "latency_thres",
    "warmup_thres",
    "acc_warmup_thres",
    "stopping_thres",
    "acc_stopping_thres",
    "measure_stats",
];

/// BookSim2's values of a per-class key for `classes` classes: its elements (a plain
/// value is one), the last repeated for the classes after them (`vector::resize` with
/// its back).
fn per_class_values(v: &str, classes: usize) -> Vec<&str> {
    let mut t = booksim_tokens(v);
    if let Some(&last) = t.last() {
        t.resize(classes, last);
    }
    t
}

impl<'a> Cfg<'a> {
    /// The settings as class `c` of `classes` sees them: each per-class key's value its
    /// element for that class (where it came from unchanged, for the refusals).
    fn for_class(&self, c: usize, classes: usize) -> Cfg<'a> {
        let mut set = self.set.clone();
        for k in PER_CLASS {
            if let Some(s) = set.get_mut(*k) {
                if let Some(v) = per_class_values(&s.value, classes).get(c) {
                    s.value = v.trim().to_string();
                }
            }
        }
        Cfg {
            file: self.file,
            text: self.text,
            args: self.args,
            set,
        }
    }
}

/// One traffic class of the equivalent network, from the settings as it sees them.
struct ClassOut {
    /// Packet sizes and weights.
    mix: Vec<(u64, u64)>,
    /// Pattern kind and the keys after it.
    pattern: String,
    pattern_keys: String,
    /// Packets per node and cycle.
    rate: f64,
    /// `on_off` (alpha, beta), or Bernoulli.
    process: Option<(f64, f64)>,
    /// Under `priority = class`, its `class_priority`; else 0.
    priority: u8,
}

impl ClassOut {
    /// Its packets and traffic, for the scenario's description.
    fn describe(&self) -> String {
        let packets = if self.mix.len() == 1 {
            format!("{}-flit packets", self.mix[0].0)
        } else {
            let sizes: Vec<String> = self.mix.iter().map(|m| m.0.to_string()).collect();
            let weights: Vec<String> = self.mix.iter().map(|m| m.1.to_string()).collect();
            format!(
                "packets of {} flits (weights {})",
                sizes.join("/"),
                weights.join("/")
            )
        };
        let bursts = match self.process {
            None => String::new(),
            Some((a, b)) => format!(" in on/off bursts (alpha {a}, beta {b})"),
        };
        format!("{packets}, {} traffic{bursts}", self.pattern)
    }

    /// The `packet_mix` line of several sizes (empty for one).
    fn mix_key(&self) -> String {
        if self.mix.len() == 1 {
            return String::new();
        }
        let items: Vec<String> = self
            .mix
            .iter()
            .map(|(f, w)| format!("{{ flits = {f}, weight = {w} }}"))
            .collect();
        format!("packet_mix = [{}]\n", items.join(", "))
    }

    /// The `process` value.
    fn process_key(&self) -> String {
        match self.process {
            None => "\"bernoulli\"".to_string(),
            Some((a, b)) => format!(
                "{{ on_off = {{ alpha = {}, beta = {} }} }}",
                toml_float(a),
                toml_float(b)
            ),
        }
    }
}

/// One class of the network (`cfg` as the class sees it, [`Cfg::for_class`]): its
/// packet sizes, pattern, rate, injection process and priority under `rule`, on
/// `nodes` nodes (`k`^`dims`, when at most 65,536); `sweeping`: the scenario sweeps
/// several rates.
fn class_of(
    cfg: &Cfg,
    nodes: Option<u64>,
    k: u64,
    dims: u64,
    rule: &str,
    sweeping: bool,
) -> Result<ClassOut, Located> {
    let dflt = modelled_default;
    let mix = packet_sizes(cfg)?;
    let mean_flits = mean_size(&mix);
    let (pattern, pattern_keys) = traffic(cfg, cfg.get("traffic", dflt("traffic")))?;
    let bit_permutation = matches!(
        pattern,
        "transpose" | "bit_complement" | "bit_reverse" | "shuffle"
    );
    if bit_permutation && !nodes.is_some_and(|n| n.is_power_of_two()) {
        // BookSim2's transpose is a bit permutation too (the two halves of the node's
        // address swapped: (x, y) -> (y, x) when k is a power of two).
        let m = format!(
            "traffic = {}: BookSim2's bit permutations need a power-of-two node count \
             (k = {k}, n = {dims} gives {k}^{dims})",
            cfg.get("traffic", ""),
        );
        return Err(cfg.at("traffic", m));
    }
    let mut rate = cfg.float("injection_rate", dflt("injection_rate"))?;
    match cfg.int(
        "injection_rate_uses_flits",
        dflt("injection_rate_uses_flits"),
    )? {
        0 => {}
        1 => rate /= mean_flits,
        n => {
            let m = format!("injection_rate_uses_flits = {n}: 0 or 1");
            return Err(cfg.at("injection_rate_uses_flits", m));
        }
    }
    if !(0.0..=1.0).contains(&rate) {
        let m = format!("injection_rate = {rate}: 0-1 packets per node and cycle");
        return Err(cfg.at("injection_rate", m));
    }
    let process = injection_process(cfg, rate, sweeping)?;
    let priority = if rule == "class" {
        let p = cfg.int("class_priority", dflt("class_priority"))?;
        u8::try_from(p).map_err(|_| {
            cfg.at(
                "class_priority",
                format!("class_priority = {p}: 0-255 in the equivalent network"),
            )
        })?
    } else {
        0
    };
    Ok(ClassOut {
        mix,
        pattern: pattern.to_string(),
        pattern_keys,
        rate,
        process,
        priority,
    })
}

/// One class's packet sizes with their weights, as BookSim2's traffic manager reads
/// `packet_size` and `packet_size_rate` (`cfg` as the class sees them,
/// [`Cfg::for_class`]): each a list per class (`{{1,5,20}}` is class 0's three sizes;
/// `{1,5,20}` would be one size for each of three classes), a plain
/// `packet_size_rate` the weight of every size, a shorter list of weights padded with
/// its last. Sizes of weight 0 are never drawn and are left out.
fn packet_sizes(cfg: &Cfg) -> Result<Vec<(u64, u64)>, Located> {
    let class0 = |key: &str| -> Result<Vec<u64>, Located> {
        let v = cfg.get(key, modelled_default(key));
        let list = booksim_tokens(v);
        if list.is_empty() {
            let m =
                format!("{key} = {v}: BookSim2 reads no element in it (its braces do not close)");
            return Err(cfg.at(key, m));
        }
        list.iter()
            .map(|x| {
                x.trim().parse::<u64>().map_err(|_| {
                    cfg.at(
                        key,
                        format!("{key} = {v}: `{x}` is not a whole number of at least 0"),
                    )
                })
            })
            .collect()
    };
    let sizes = class0("packet_size")?;
    let mut weights = class0("packet_size_rate")?;
    if sizes.is_empty() || weights.is_empty() {
        return Err(cfg.at("packet_size", "packet_size: no packet size given".into()));
    }
    if let Some(z) = sizes.iter().find(|&&s| s == 0) {
        return Err(cfg.at("packet_size", format!("packet_size: a packet of {z} flits")));
    }
    let last = *weights.last().unwrap_or(&1);
    weights.resize(sizes.len(), last);
    let mix: Vec<(u64, u64)> = sizes
        .into_iter()
        .zip(weights)
        .filter(|&(_, w)| w > 0)
        .collect();
    if mix.is_empty() {
        let m = "packet_size_rate: every packet size has weight 0".to_string();
        return Err(cfg.at("packet_size_rate", m));
    }
    Ok(mix)
}

/// BookSim2's `_GetAveragePacketSize`: the weighted mean of the sizes.
fn mean_size(mix: &[(u64, u64)]) -> f64 {
    let w: u64 = mix.iter().map(|m| m.1).sum();
    mix.iter().map(|m| (m.0 * m.1) as f64).sum::<f64>() / w as f64
}

/// BookSim2's `injection_process`: `bernoulli` (None), or `on_off` with its (alpha,
/// beta) from `on_off(alpha,beta,r1)` or `burst_alpha`, `burst_beta`, `burst_r1`
/// (exactly two of the three given as non-negative; the third follows from `rate`, as
/// in BookSim2's `OnOffInjectionProcess`). A burst rate r1 ties alpha or beta to the
/// load, so it is refused for a sweep of several rates (`sweep`).
fn injection_process(cfg: &Cfg, rate: f64, sweep: bool) -> Result<Option<(f64, f64)>, Located> {
    let key = "injection_process";
    let v = cfg.get(key, modelled_default(key));
    let (name, params) = match v.split_once('(') {
        Some((n, p)) => (n, p.strip_suffix(')').unwrap_or(p)),
        None => (v, ""),
    };
    match name {
        "bernoulli" => return Ok(None),
        "on_off" => {}
        _ => {
            let m = format!("{key} = {v}: BookSim2 injects by `bernoulli` or `on_off`");
            return Err(cfg.at(key, m));
        }
    }
    let params: Vec<String> = if params.trim().is_empty() {
        Vec::new()
    } else {
        params.split(',').map(|s| s.trim().to_string()).collect()
    };
    if params.len() > 3 {
        let m = format!(
            "{key} = {v}: a fourth parameter sets nodes' initial states; here every node \
             starts off (BookSim2's default)"
        );
        return Err(cfg.at(key, m));
    }
    let num = |i: usize, k: &str| -> Result<f64, Located> {
        match params.get(i) {
            Some(p) => p
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| cfg.at(key, format!("{key} = {v}: `{p}` is not a number"))),
            None => cfg.float(k, modelled_default(k)),
        }
    };
    let alpha = num(0, "burst_alpha")?;
    let beta = num(1, "burst_beta")?;
    let r1 = num(2, "burst_r1")?;
    let set = [alpha, beta, r1].iter().filter(|x| **x >= 0.0).count();
    if set != 2 {
        let m = format!(
            "{key} = {v} with alpha {alpha}, beta {beta}, r1 {r1}: BookSim2 needs exactly two \
             of burst_alpha, burst_beta and burst_r1 at 0 or above (a negative one follows \
             from the other two and the rate)"
        );
        return Err(cfg.at(key, m));
    }
    if r1 >= 0.0 && sweep {
        let m = format!(
            "{key} = {v}: with a burst rate r1 = {r1}, alpha or beta depends on the load; \
             translate one injection_rate at a time"
        );
        return Err(cfg.at(key, m));
    }
    let (alpha, beta) = if alpha < 0.0 {
        (beta * rate / (r1 - rate), beta)
    } else if beta < 0.0 {
        (alpha, alpha * (r1 - rate) / rate)
    } else {
        (alpha, beta)
    };
    Ok(Some((alpha, beta)))
}

/// `x` as a TOML float or integer, shortest form.
fn toml_float(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}
