// Cluster reading of the validation: a row's gpu and interconnect columns as a zoo cluster with
// the node, NIC count, line rate and routing the text states.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>

#include "sim/base/format.h"
#include "sim/driver/validate_rules.h"
#include "sim/driver/validate_text.h"

namespace ts::driver::reading {

namespace {

// Per-port line rate of an InfiniBand generation named in the interconnect text: the rate it
// carries ("NDR200", "HDR100"), else the generation's (the vocabulary's link_generations).
std::optional<double> ib_rate_gbits(const std::ssub_match& word, const std::ssub_match& rate,
                                    const config::ReadingVocabulary& vocab) {
  if (rate.matched) return std::stod(rate.str());
  for (const auto& g : vocab.link_generations) {
    if (g.word == word.str()) return g.gbits;
  }
  return std::nullopt;
}

// "ndr|hdr|…": the generations' words as a regex alternation (they are lower-case letters).
std::string ib_words(const config::ReadingVocabulary& vocab) {
  std::string out;
  for (const auto& g : vocab.link_generations) out += (out.empty() ? "" : "|") + g.word;
  return out.empty() ? "(?!)" : out;
}

// A line rate in Gb/s from a number as written ("400", "3.2", "3,200") and its unit (Gb/s,
// Gbps, Gbit, G, Tb/s, Tbps).
double rate_gbits(const std::string& number, const std::string& unit) {
  std::string n = number;
  n.erase(std::remove(n.begin(), n.end(), ','), n.end());
  const double v = std::stod(n);
  return unit.front() == 't' ? v * 1000.0 : v;
}

// "A800" for "a800": a part's name as datasheets write it.
std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

std::optional<config::Cluster> build_cluster(const PublishedRun& r, const config::ReadingVocabulary& vocab,
                                             std::vector<std::string>& notes, std::string& reason) {
  const std::string g = to_lower(r.gpu);
  std::string zoo;
  std::int64_t nominal_gb = 0;
  if (g.empty()) {
    reason = "gpu is empty";
    return std::nullopt;
  }
  const bool pcie = says(vocab, config::Words::kUnmodelledCard, g);
  // A800 and H800: the export versions of the A100 and H100 SXM, the same chip with NVLink cut
  // to 400 GB/s (bidirectional, per GPU) from 600 GB/s (A100) and 900 GB/s (H100).
  const std::string* nvlink_400 = spelling_in(vocab, config::Words::kNvlink400, g);
  // Memory size as written ("80GB", "40 GB"), the vocabulary's gpu-memory-gb pattern.
  const auto gb = static_cast<std::int64_t>(number_in(vocab, config::Numbers::kGpuMemoryGb, g).value_or(0));
  // A column naming only the architecture ("NVIDIA Ampere GPUs", "Hopper GPUs") is read as its
  // data-centre training part (the vocabulary's gpu_architectures).
  std::string named = g;
  for (const auto& a : vocab.gpu_architectures) {
    if (!has(g, a.word) || std::any_of(a.unless.begin(), a.unless.end(), [&](const auto& p) { return has(g, p); })) {
      continue;
    }
    named += " " + a.part;
    notes.push_back(upper(a.part) + " SXM for the architecture named ('" + r.gpu + "')");
  }
  // The first of the vocabulary's GPU parts the column names (rack-scale parts before the HGX/DGX
  // ones whose names they contain; "NVL" in theirs is the 72-GPU NVLink domain, not a card), with
  // the architecture-only names read as their part.
  const auto names = [&](const std::vector<std::string>& words) {
    return std::any_of(words.begin(), words.end(), [&](const std::string& w) { return has(named, w); });
  };
  for (const auto& part : vocab.gpu_parts) {
    if (!names(part.spelled) || (pcie && !part.rack_scale)) continue;
    const bool sized = std::find(part.when_gb.begin(), part.when_gb.end(), gb) != part.when_gb.end();
    if ((!part.when_gb.empty() || !part.when_words.empty()) && !sized && !names(part.when_words)) continue;
    zoo = part.cluster;
    nominal_gb = part.nominal_gb;
    break;
  }
  if (zoo.empty()) {
    reason = "no cluster model for GPU '" + r.gpu +
             "' (known: A100/A800 SXM 40/80GB, H100/H800 SXM 80GB and its 94/96GB HBM2e variant, "
             "H200 SXM, B200, B300, GB200 and GB300 NVL72; PCIe and NVL cards are not modelled)";
    return std::nullopt;
  }
  config::Cluster c = config::load_cluster(zoo);
  std::string variant;
  // A memory size other than the zoo GPU's (H100 SXM 94 GB on the 96 GB HBM2e cluster): same
  // compute and bandwidth, the capacity named in the GPU column ("GB" as marketed, which
  // nvidia-smi shows as about that many GiB, e.g. 81920 MiB for the A100 80GB).
  {
    if (gb > 0 && gb != nominal_gb && gb >= 16 && gb <= 1024) {
      c.gpu.memory_capacity = Bytes::gib(static_cast<double>(gb));
      variant += " " + str(gb) + "GB";
      notes.push_back(c.gpu.name + " with " + str(gb) + " GiB of memory");
    }
  }
  auto& domain = c.cluster.scale_up;
  auto& host = c.cluster.host;
  if (nvlink_400) {
    domain.nvlink_bandwidth = Bandwidth::gbytes_per_s(200);  // per direction
    variant += " NVLink 400GB/s";
    notes.push_back(c.gpu.name + " compute with NVLink at 400 GB/s bidirectional (" +
                    upper(*nvlink_400) + ")");
  }

  // Interconnect: GPUs per node, NIC count and line rate when the text states them; the zoo
  // cluster's DGX-class node otherwise. A count is a whole number, not the digit ending a word
  // ("ConnectX-6", "NVLink4", "H100").
  const std::string ic = to_lower(r.interconnect);
  std::smatch m;
  if (const auto per_node = number_in(vocab, config::Numbers::kGpusPerNode, ic)) {
    const auto n = static_cast<std::int32_t>(*per_node);
    // A server of n GPUs is its own NVLink domain; in a rack-scale domain (NVL72) only the
    // host changes, when whole hosts still fill the domain.
    const bool server = domain.gpus_per_domain == host.gpus_per_host;
    if (n > 0 && n != host.gpus_per_host && (server || domain.placed_per_domain() % n == 0)) {
      if (server) {
        domain.gpus_per_domain = n;
        domain.gpus_used_per_domain = 0;
      }
      host.gpus_per_host = n;
      host.nics_per_host = std::min(host.nics_per_host, n);
      variant += " " + str(n) + "gpu/node";
    }
  }
  std::optional<std::int32_t> nics;
  std::optional<double> gbits;
  // The first match of `re` whose clause (from the last ',' or ';' before it) is not about
  // NVLink: "NVLink4 with 18 links per GPU", "NVLink/NVSwitch in node (900 GB/s)".
  const auto outside_nvlink = [&](const std::regex& re) -> std::optional<std::smatch> {
    for (auto it = std::sregex_iterator(ic.begin(), ic.end(), re); it != std::sregex_iterator(); ++it) {
      const std::string before = ic.substr(0, static_cast<std::size_t>(it->position()));
      const auto start = before.find_last_of(",;");
      if (!says(vocab, config::Words::kNvlinkClause, start == std::string::npos ? before : before.substr(start))) {
        return *it;
      }
    }
    return std::nullopt;
  };
  // "8x200Gb/s", "8 x 400 Gbps", "4×100G", "8x NVIDIA Mellanox 400 Gbps" (up to three words
  // between the count and the rate, none of them a GPU: "8x A100 with 200 Gb/s" counts GPUs).
  static const std::regex kCountRate(
      R"((?:^|[^a-z0-9.\-])(\d{1,4})\s*(?:x|×|\*)\s*(?:(?!gpus?\b|[ah][18]00|h200|per\b)[a-z][^\s,;()]*\s+){0,3}(\d{1,7}(?:\.\d+)?)\s*(gb/s|gbps|gbit/s|gbits?\b|gb\b|g\b|tb/s|tbps))");
  // "8x HDR", "8 x NDR400", "2xHDR100".
  const std::regex kCountIb(R"((?:^|[^a-z0-9.\-])(\d{1,4})\s*(?:x|×|\*)?\s*()" + ib_words(vocab) + R"()(\d{3})?\b)");
  // "4 ConnectX-6 HCAs", "4 OmniPath links", "8 NICs": a count of network adapters, up to four
  // words before the adapter word; a number with a rate unit ("400 Gbps HDR HCAs") is a rate.
  static const std::regex kNicCount(
      R"((?:^|[^a-z0-9.\-])(\d{1,4})(?!\d|\s*(?:gb|gbps|gbit|g\b|tb|tbps))\s*(?:x|×)?\s*(?:(?!gpus?\b|per\b|and\b|with\b)[a-z0-9][^\s,;()]*\s+){0,4}(?:hcas?|nics?|adapters?|links|ports|rails)\b)");
  static const std::regex kNum(R"((\d{1,3}(?:,\d{3}){1,3}|\d{1,7}(?:\.\d+)?)\s*(gb/s|gbps|gbit/s|gbits?\b|tb/s|tbps|tbit/s))");
  const std::regex kIb(R"(\b()" + ib_words(vocab) + R"()(\d{3})?\b)");
  if (std::regex_search(ic, m, kCountRate)) {
    nics = static_cast<std::int32_t>(std::stoi(m[1].str()));
    gbits = rate_gbits(m[2].str(), m[3].str());
  } else if (std::regex_search(ic, m, kCountIb)) {
    nics = static_cast<std::int32_t>(std::stoi(m[1].str()));
    gbits = ib_rate_gbits(m[2], m[3], vocab);
  } else {
    std::optional<std::int32_t> stated_nics;
    if (const auto count = outside_nvlink(kNicCount)) stated_nics = static_cast<std::int32_t>(std::stoi((*count)[1].str()));
    std::optional<double> rate;
    bool per_node = false;
    if (const auto num = outside_nvlink(kNum)) {
      rate = rate_gbits((*num)[1].str(), (*num)[2].str());
      const std::string after = num->suffix().str();
      // A per-node aggregate: "1600 Gbps per node", "800Gbps inter-node interconnect" (the
      // node's links to the others) unless the rate is said to be per GPU; an AWS EFA rate,
      // which AWS quotes per instance (p4d 400 Gbps over 4 EFA adapters, p5 3200 Gbps over 32);
      // or a rate no single NIC port reaches (above 800 Gb/s, XDR).
      per_node = (says(vocab, config::Words::kPerNodeRate, after) && !says(vocab, config::Words::kPerGpuRate, after)) ||
                 says(vocab, config::Words::kPerInstanceRate, ic) || *rate > 800;
    } else if (std::regex_search(ic, m, kIb)) {
      rate = ib_rate_gbits(m[1], m[2], vocab);
    }
    if (stated_nics && *stated_nics > 0) {
      // With the adapters counted, a rate is per adapter unless no adapter reaches it.
      nics = stated_nics;
      if (rate) gbits = *rate > 800 ? *rate / *stated_nics : *rate;
    } else if (rate && per_node) {
      // A per-node aggregate: one NIC per GPU sharing it.
      nics = host.nics_per_host > 0 ? host.nics_per_host : host.gpus_per_host;
      gbits = *rate / *nics;
    } else {
      // A bare rate: per NIC, one NIC per GPU (the DGX-class layout).
      gbits = rate;
    }
  }
  if (nics && *nics > 0 && *nics != host.nics_per_host) {
    host.nics_per_host = std::min(*nics, host.gpus_per_host * 4);
    variant += " " + str(host.nics_per_host) + "nic";
  }
  if (gbits && *gbits > 0 && std::fabs(host.nic_bandwidth.bytes_per_s() * 8e-9 - *gbits) > 1e-6) {
    host.nic_bandwidth = Bandwidth::gbits_per_s(*gbits);
    variant += " " + str(static_cast<std::int64_t>(std::llround(*gbits))) + "Gb/s";
  }
  // RoCE fabrics route by ECMP hashing (static per flow); adaptive routing is the InfiniBand
  // subnet manager's default, which the zoo clusters assume.
  if (says(vocab, config::Words::kStaticRouting, ic) && c.cluster.fabric.adaptive_routing) {
    c.cluster.fabric.adaptive_routing = false;
    variant += " static routing";
  }
  if (!variant.empty()) {
    c.cluster.name += " [" + trim(variant) + "]";
    notes.push_back("cluster " + c.cluster.name + " from the interconnect/gpu columns");
  }
  return c;
}

}  // namespace ts::driver::reading
