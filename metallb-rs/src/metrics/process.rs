//! The standard `process_*` metrics (client_golang's names and help, what
//! dashboards and alerts built for any Go exporter read), collected on
//! each scrape from `/proc`. The parsers are pure and tested on fixture
//! text; only [`ProcessCollector::collect`] reads files.

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, Opts};
use std::sync::Mutex;

/// What `/proc/self/stat` says that the metrics need, in the kernel's
/// units (clock ticks, pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// User time, in clock ticks.
    pub utime: u64,
    /// System time, in clock ticks.
    pub stime: u64,
    /// Start time after boot, in clock ticks.
    pub starttime: u64,
    /// Virtual memory size, in bytes.
    pub vsize: u64,
    /// Resident set size, in pages.
    pub rss: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) may hold spaces
/// and parentheses, so fields are counted from its last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    // Field 3 (state) is the first after the name; field n is at n - 3.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        utime: field(14)?,
        stime: field(15)?,
        starttime: field(22)?,
        vsize: field(23)?,
        rss: field(24)?,
    })
}

/// A soft limit from `/proc/<pid>/limits`: `None` when the row is
/// missing, `u64::MAX` when unlimited (what client_golang reports).
pub fn parse_soft_limit(limits: &str, row: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with(row))?;
    match line[row.len()..].split_whitespace().next()? {
        "unlimited" => Some(u64::MAX),
        n => n.parse().ok(),
    }
}

/// The boot time (seconds since the epoch) from `/proc/stat`.
pub fn parse_boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The metric values from what `/proc` said, with `ticks` clock ticks
/// per second and pages of `page_size` bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Values {
    /// `process_cpu_seconds_total`.
    pub cpu_seconds: f64,
    /// `process_virtual_memory_bytes`.
    pub virtual_bytes: f64,
    /// `process_resident_memory_bytes`.
    pub resident_bytes: f64,
    /// `process_start_time_seconds`.
    pub start_time: f64,
}

/// Turns ticks and pages into seconds and bytes.
pub fn values(stat: &Stat, boot_time: u64, ticks: u64, page_size: u64) -> Values {
    let ticks = ticks.max(1) as f64;
    Values {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        virtual_bytes: stat.vsize as f64,
        resident_bytes: stat.rss.saturating_mul(page_size) as f64,
        start_time: boot_time as f64 + stat.starttime as f64 / ticks,
    }
}

/// The `process_*` families of this process.
pub struct ProcessCollector {
    descs: Vec<Desc>,
    cpu: Counter,
    open_fds: Gauge,
    max_fds: Gauge,
    virtual_bytes: Gauge,
    virtual_max_bytes: Gauge,
    resident_bytes: Gauge,
    start_time: Gauge,
    /// Two scrapes at once would interleave the counter's reset and add.
    collecting: Mutex<()>,
}

impl Default for ProcessCollector {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessCollector {
    /// The collector, with client_golang's names and help.
    pub fn new() -> Self {
        let gauge = |name: &str, help: &str| {
            Gauge::with_opts(Opts::new(name, help)).expect("valid metric definition")
        };
        let cpu = Counter::with_opts(Opts::new(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
        ))
        .expect("valid metric definition");
        let open_fds = gauge("process_open_fds", "Number of open file descriptors.");
        let max_fds = gauge(
            "process_max_fds",
            "Maximum number of open file descriptors.",
        );
        let virtual_bytes = gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
        );
        let virtual_max_bytes = gauge(
            "process_virtual_memory_max_bytes",
            "Maximum amount of virtual memory available in bytes.",
        );
        let resident_bytes = gauge(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
        );
        let start_time = gauge(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
        );
        let mut descs: Vec<Desc> = cpu.desc().into_iter().cloned().collect();
        for g in [
            &open_fds,
            &max_fds,
            &virtual_bytes,
            &virtual_max_bytes,
            &resident_bytes,
            &start_time,
        ] {
            descs.extend(g.desc().into_iter().cloned());
        }
        Self {
            descs,
            cpu,
            open_fds,
            max_fds,
            virtual_bytes,
            virtual_max_bytes,
            resident_bytes,
            start_time,
            collecting: Mutex::new(()),
        }
    }
}

/// Clock ticks per second and the page size, from sysconf (Linux's usual
/// values when it cannot say).
fn ticks_and_page_size() -> (u64, u64) {
    use nix::unistd::{SysconfVar, sysconf};
    let get = |var, default: u64| {
        sysconf(var)
            .ok()
            .flatten()
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(default)
    };
    (
        get(SysconfVar::CLK_TCK, 100),
        get(SysconfVar::PAGE_SIZE, 4096),
    )
}

impl Collector for ProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let _one = self.collecting.lock();
        let mut families = Vec::new();
        let read = |p: &str| std::fs::read_to_string(p).ok();
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(dir.count() as f64);
            families.extend(self.open_fds.collect());
        }
        if let Some(limits) = read("/proc/self/limits") {
            if let Some(n) = parse_soft_limit(&limits, "Max open files") {
                self.max_fds.set(n as f64);
                families.extend(self.max_fds.collect());
            }
            if let Some(n) = parse_soft_limit(&limits, "Max address space") {
                self.virtual_max_bytes.set(n as f64);
                families.extend(self.virtual_max_bytes.collect());
            }
        }
        let stat = read("/proc/self/stat").and_then(|s| parse_stat(&s));
        let boot = read("/proc/stat").and_then(|s| parse_boot_time(&s));
        if let (Some(stat), Some(boot)) = (stat, boot) {
            let (ticks, page_size) = ticks_and_page_size();
            let v = values(&stat, boot, ticks, page_size);
            self.cpu.reset();
            self.cpu.inc_by(v.cpu_seconds);
            self.virtual_bytes.set(v.virtual_bytes);
            self.resident_bytes.set(v.resident_bytes);
            self.start_time.set(v.start_time);
            for c in [
                self.cpu.collect(),
                self.virtual_bytes.collect(),
                self.resident_bytes.collect(),
                self.start_time.collect(),
            ] {
                families.extend(c);
            }
        }
        families
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real line, its command name holding a space and a `)`.
    const STAT: &str = "4242 (metallb ) rs) S 1 4242 4242 0 -1 4194560 1510 0 0 0 \
        250 130 0 0 20 0 3 0 51234 23740416 1650 18446744073709551615 1 1 0 0 0 0 0 \
        0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        assert_eq!(
            parse_stat(STAT),
            Some(Stat {
                utime: 250,
                stime: 130,
                starttime: 51234,
                vsize: 23740416,
                rss: 1650,
            })
        );
        assert_eq!(parse_stat("4242 (short) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    #[test]
    fn values_are_seconds_and_bytes() {
        let stat = parse_stat(STAT).expect("stat");
        let v = values(&stat, 1_700_000_000, 100, 4096);
        assert_eq!(v.cpu_seconds, 3.8);
        assert_eq!(v.virtual_bytes, 23740416.0);
        assert_eq!(v.resident_bytes, 1650.0 * 4096.0);
        assert!((v.start_time - 1_700_000_512.34).abs() < 1e-3, "{v:?}");
    }

    const LIMITS: &str = "\
Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            1024                 1048576              files
Max address space         unlimited            unlimited            bytes
";

    #[test]
    fn soft_limits_and_unlimited() {
        assert_eq!(parse_soft_limit(LIMITS, "Max open files"), Some(1024));
        assert_eq!(
            parse_soft_limit(LIMITS, "Max address space"),
            Some(u64::MAX)
        );
        assert_eq!(parse_soft_limit(LIMITS, "Max locked memory"), None);
    }

    #[test]
    fn boot_time_from_proc_stat() {
        let stat = "cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n";
        assert_eq!(parse_boot_time(stat), Some(1_700_000_000));
        assert_eq!(parse_boot_time("cpu 1\n"), None);
    }

    #[test]
    fn every_family_is_collected_with_client_golangs_names() {
        let registry = prometheus::Registry::new();
        registry
            .register(Box::new(ProcessCollector::new()))
            .expect("registered");
        let text = crate::metrics::render(&registry);
        for name in [
            "# TYPE process_cpu_seconds_total counter",
            "# TYPE process_open_fds gauge",
            "# TYPE process_max_fds gauge",
            "# TYPE process_virtual_memory_bytes gauge",
            "# TYPE process_virtual_memory_max_bytes gauge",
            "# TYPE process_resident_memory_bytes gauge",
            "# TYPE process_start_time_seconds gauge",
        ] {
            assert!(text.contains(name), "{name} missing in {text}");
        }
        let start: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("process_start_time_seconds "))
            .and_then(|v| v.parse().ok())
            .expect("a start time");
        // Started after 2020 and not in the future.
        assert!(start > 1.58e9, "{start}");
    }
}
