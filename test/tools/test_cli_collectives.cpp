// scaledl bench allreduce (issue #14): real collectives on LibTorch's Gloo
// process group, N local ranks over loopback, rows in the store, and the bad
// inputs of a distributed launch (world 0, a port in use, a rank that never joins).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "scaledl/bench/collective_bench.hpp"
#include "scaledl/core/error.hpp"
#include "scaledl/core/fs_util.hpp"
#include "scaledl/io/store.hpp"
#include "test_util.hpp"

using namespace scaledl::test;
namespace fs = std::filesystem;

namespace {
/// Listens on a free loopback port until destroyed; port() says which.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = 0;
    socklen_t len = sizeof(a);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::listen(fd, 1) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};
}  // namespace

TEST(Collectives, SizesBackendsAndFactors) {
  using namespace scaledl;
  auto s = parse_size_range("1K..1M");
  ASSERT_EQ(s.size(), 11u);
  EXPECT_EQ(s.front(), 1024);
  EXPECT_EQ(s.back(), 1024 * 1024);
  EXPECT_EQ(parse_size_range("4K,1M").size(), 2u);
  EXPECT_THROW(parse_size_range("1M..1K"), Error);
  EXPECT_THROW(parse_size_range("12Q"), Error);
  EXPECT_THROW(parse_size_range(""), Error);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::AllGather, 4), 0.75);
  EXPECT_EQ(parse_collective("all_reduce"), Collective::AllReduce);
  EXPECT_THROW(parse_collective("broadcast"), Error);
  const auto b = compiled_backends();
  EXPECT_EQ(b, std::vector<std::string>{"gloo"});  // Debian's LibTorch: Gloo only, no NCCL or MPI
}

TEST(Collectives, RendezvousFromTheLauncherEnvironment) {
  using namespace scaledl;
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "8", 1);
  ::setenv("LOCAL_WORLD_SIZE", "4", 1);
  ::setenv("MASTER_PORT", "29555", 1);
  bool found = false;
  Rendezvous r = rendezvous_from_env(&found);
  EXPECT_TRUE(found);
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world, 8);
  EXPECT_EQ(r.nodes(), 2);
  EXPECT_EQ(r.local_rank, 3);
  ::setenv("RANK", "8", 1);
  EXPECT_NE(error_of([] { rendezvous_from_env(); }).find("RANK=8 must be < WORLD_SIZE=8"), std::string::npos);
  ::setenv("RANK", "x", 1);
  EXPECT_NE(error_of([] { rendezvous_from_env(); }).find("RANK=\"x\""), std::string::npos);
  for (const char* k : {"RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_PORT"}) ::unsetenv(k);
}

TEST(CliCollectives, TwoLocalRanksMeasureAndStoreRows) {
  const std::string db = fresh_store_path("collectives");
  const std::string cmd =
      "bench allreduce --backend gloo --world 2 --sizes 4K,256K --repeats 3 --warmup 1 "
      "--collective allreduce,allgather,reducescatter,sendrecv --db " +
      db;
  CliResult r = run_cli(cmd);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("gloo on 2 ranks (1 node, intra-node)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unsupported: gloo"), std::string::npos) << r.out;  // Gloo has no reduce_scatter
  scaledl::Store store(db, true);
  auto rows = store.collectives();  // ok rows only: allreduce, allgather, sendrecv x 2 sizes at most
  auto all = store.collectives("", "", false);
  EXPECT_EQ(all.size(), 7u);  // 3 x 2 + one unsupported reduce-scatter row
  for (const auto& m : all) {
    EXPECT_EQ(m.world, 2);
    EXPECT_EQ(m.backend, "gloo");
    if (m.status == "unsupported") continue;
    EXPECT_GT(m.time_s, 0);
    EXPECT_GT(m.busbw_gbs, 0);
  }
  EXPECT_LE(rows.size(), all.size());
  // The same configuration again adds nothing (same keys).
  r = run_cli(cmd);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("0 rows -> "), std::string::npos) << r.out;
}

TEST(CliCollectives, BadLaunchesAreOneClearErrorNotAHang) {
  expect_one_error("bench allreduce --world 0", "--world=0 must be >= 2");
  expect_one_error("bench allreduce --world 2 --backend nccl",
                   "--backend=nccl is not compiled into this build's LibTorch (compiled in: gloo)");
  expect_one_error("bench allreduce --world 2 --backend shm", "--backend=shm is not a backend");
  expect_one_error("bench allreduce --world 2 --sizes 1M..1K", "--sizes=\"1M..1K\"");
  expect_one_error("bench allreduce --world 2 --collective broadcast", "--collective=\"broadcast\"");
  expect_one_error("bench allreduce", "no launcher environment");
  {
    Listener busy;
    ASSERT_GT(busy.port, 0);
    expect_one_error("bench allreduce --world 2 --port " + std::to_string(busy.port),
                     "--port=" + std::to_string(busy.port) + " is in use");
  }
  // Rank 0 of 2 whose peer never starts: a timeout error after --timeout, not a hang.
  int port = 0;
  {
    Listener probe;  // a port number that is free once the listener closes
    port = probe.port;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string env =
      "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " RANK=0 WORLD_SIZE=2 ";
  const std::string bin = std::string(SCALEDL_BINARY_DIR) + "/tools/scaledl";
  FILE* p = popen((env + bin + " bench allreduce --timeout 2 --sizes 4K 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int st = pclose(p);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(WEXITSTATUS(st), 1) << out;
  EXPECT_EQ(out.rfind("scaledl: error: rendezvous at 127.0.0.1:", 0), 0u) << out;
  EXPECT_NE(out.find("timed out after 2 s: not all WORLD_SIZE=2 ranks joined"), std::string::npos) << out;
  EXPECT_LT(secs, 60);
}

namespace {
/// A fresh temporary folder NAME<pid> holding comm.json: 100 GB/s bus bandwidth, 10 us per step.
fs::path dir_with_comm(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / (name + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "comm.json") << R"({"bandwidth_Bps": 1.0e11, "gamma_s": 1.0e-5})";
  return dir;
}
}  // namespace

TEST(CliParallel, PredictGpusTpPpUsesTheCollectiveModelAndRefusesImpossibleSplits) {
  const std::string src = SCALEDL_SOURCE_DIR;
  const fs::path dir = dir_with_comm("scaledl_par_");
  const std::string base = "predict --bundle " + src + "/models/bundles/default " + src +
                           "/models/gpt2.json --device-spec " + src +
                           "/models/devices/a100-sxm4-40gb.json --seq 1024 "
                           "--batch 8 --dtype fp16 ";
  CliResult r = run_cli(base + "--comm " + (dir / "comm.json").string() +
                        " --gpus 8 --tp 2 --pp 2 --microbatches 4 --recompute --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["plan"]["dp"], 2);
  EXPECT_DOUBLE_EQ(j["plan"]["bubble_fraction"].get<double>(), 1.0 / 5.0);
  EXPECT_GT(j["t_tp_ms"].get<double>(), 0);
  EXPECT_GT(j["t_dp_ms"].get<double>(), 0);
  EXPECT_GT(j["t_recompute_ms"].get<double>(), 0);
  EXPECT_EQ(j["global_batch"], 16);
  EXPECT_NEAR(j["t_iter_ms"].get<double>(),
              j["t_pipeline_ms"].get<double>() + j["t_dp_ms"].get<double>() + j["t_opt_ms"].get<double>(),
              1e-6);
  // A faster interconnect predicts a shorter iteration: the fitted model is used.
  std::ofstream(dir / "slow.json") << R"({"bandwidth_Bps": 1.0e9, "gamma_s": 1.0e-4})";
  CliResult s = run_cli(base + "--comm " + (dir / "slow.json").string() +
                        " --gpus 8 --tp 2 --pp 2 --microbatches 4 --recompute --json");
  ASSERT_EQ(s.rc, 0) << s.out;
  EXPECT_GT(nlohmann::json::parse(s.out.substr(s.out.find('{')))["t_iter_ms"].get<double>(),
            j["t_iter_ms"].get<double>());
  expect_one_error(base + "--comm " + (dir / "comm.json").string() + " --gpus 5 --tp 5",
                   "--tp=5 does not divide num_attention_heads=12");
  expect_one_error(base + "--comm " + (dir / "comm.json").string() + " --gpus 16 --pp 16",
                   "--pp=16 is larger than the 12 layers");
  // The A100's fabric preset prices the collectives without --comm; a GPU with no preset (a T4)
  // asks for one.
  CliResult pre = run_cli(base + "--gpus 4");
  ASSERT_EQ(pre.rc, 0) << pre.out;
  EXPECT_NE(pre.out.find("collectives  fabric hgx-a100 (the preset of this GPU; measured)"),
            std::string::npos)
      << pre.out;
  std::string t4 = base;
  t4.replace(t4.find("a100-sxm4-40gb.json"), std::string("a100-sxm4-40gb.json").size(), "t4.json");
  expect_one_error(t4 + "--gpus 4", "--gpus=4 needs a collective model: --fabric NAME");
  expect_one_error(base + "--gpus 4 --fabric hgx-h100 --comm " + (dir / "comm.json").string(),
                   "--fabric=hgx-h100 and --comm: give one collective model, not both");
  expect_one_error(base + "--gpus 4 --fabric nvlink9",
                   "--fabric=\"nvlink9\" is neither a file nor a preset name");
  expect_one_error(base + "--comm " + (dir / "comm.json").string() + " --gpus 4 --zero 5",
                   "--zero=5 is not a ZeRO stage");
  // --host-node-us: every slot takes at least its nodes x d; the JSON and the text say so.
  CliResult h = run_cli(base + "--comm " + (dir / "comm.json").string() +
                        " --gpus 8 --tp 2 --pp 2 --microbatches 4 --recompute --host-node-us 500 --json");
  ASSERT_EQ(h.rc, 0) << h.out;
  const auto hj = nlohmann::json::parse(h.out.substr(h.out.find('{')));
  EXPECT_TRUE(hj["host_bound"].get<bool>());
  EXPECT_FALSE(hj.contains("host_warning"));  // a host term is given
  // The longest stage's nodes: its blocks and the embedding or the head, not both.
  EXPECT_NEAR(hj["t_host_ms"].get<double>(), hj["stage_nodes"].get<double>() * 0.5, 1e-6);
  EXPECT_LT(hj["stage_nodes"].get<double>(), hj["slot_nodes"].get<double>());
  EXPECT_GT(hj["t_iter_ms"].get<double>(), j["t_iter_ms"].get<double>());
  CliResult ht = run_cli(base + "--comm " + (dir / "comm.json").string() +
                         " --gpus 8 --tp 2 --pp 2 --microbatches 4 --host-node-us 500");
  ASSERT_EQ(ht.rc, 0) << ht.out;
  EXPECT_NE(ht.out.find("host term"), std::string::npos) << ht.out;
  EXPECT_NE(ht.out.find("x 500.0 us (--host-node-us): the host sets each slot"), std::string::npos) << ht.out;
  // One GPU: T_sum = max(layer times, nodes x d).
  CliResult one = run_cli(base + "--host-node-us 500");
  ASSERT_EQ(one.rc, 0) << one.out;
  EXPECT_NE(one.out.find("x 500.0 us, this device's host issuing them (--host-node-us): it sets T_sum"),
            std::string::npos)
      << one.out;
  // Without one, a configuration whose layer sum is below an eager host's cost per node says so.
  CliResult tiny = run_cli("predict --bundle " + src + "/models/bundles/default " + src +
                           "/models/gpt2.json "
                           "--device-spec " +
                           src + "/models/devices/a100-sxm4-40gb.json --seq 16 --batch 1 --json");
  ASSERT_EQ(tiny.rc, 0) << tiny.out;
  const auto tj = nlohmann::json::parse(tiny.out.substr(tiny.out.find('{')));
  EXPECT_NE(tj.value("host_warning", "").find("us per graph node"), std::string::npos) << tj.dump();
  // Megatron-LM's kernels carry its host cost by default; CUDA graphs take it away.
  CliResult mg = run_cli(base + "--framework megatron");
  ASSERT_EQ(mg.rc, 0) << mg.out;
  EXPECT_NE(mg.out.find("x 73.0 us, this device's host issuing them (Megatron-LM's default"),
            std::string::npos)
      << mg.out;
  CliResult cg = run_cli(base + "--framework megatron --cuda-graphs");
  ASSERT_EQ(cg.rc, 0) << cg.out;
  EXPECT_EQ(cg.out.find("host term"), std::string::npos) << cg.out;
  expect_one_error(base + "--cuda-graphs --host-node-us 5", "--cuda-graphs with --host-node-us=5");
  expect_one_error(
      base + "--comm " + (dir / "comm.json").string() + " --gpus 2 --recompute --recompute-selective",
      "--recompute and --recompute-selective: give one granularity");
  expect_one_error(base + "--comm " + (dir / "comm.json").string() + " --gpus 2 --tp 2 --overlap-tp-comm",
                   "--overlap-tp-comm needs --sp with --tp > 1");
  expect_one_error(base + "--host-node-us -1", "--host-node-us=-1 must be a number in [0, 1e6]");
  expect_one_error(base + "--host-node-us abc", "--host-node-us");
  scaledl::remove_tree(dir);
}

TEST(CliParallel, ScalePrintsAndPlotsASpeedupCurve) {
  const std::string src = SCALEDL_SOURCE_DIR;
  const fs::path dir = dir_with_comm("scaledl_scale_");
  const std::string base = "scale " + src + "/models/gpt2.json --bundle " + src + "/models/bundles/default " +
                           "--device-spec " + src +
                           "/models/devices/a100-sxm4-40gb.json --seq 512 --batch 32 ";
  CliResult r =
      run_cli(base + "--comm " + (dir / "comm.json").string() + " --gpus 1..8 --samples 100000 " +
              "--price-per-gpu-hour 2 --target-epoch-s 100000 --plot " + (dir / "plot").string() + " --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  ASSERT_EQ(j["points"].size(), 4u);  // 1, 2, 4, 8 GPUs
  // One GPU against one GPU's unsplit prediction: 1, or below 1 where the batch has to be split into
  // micro-batches to fit (here: 32 x 512 does not fit an A100-40GB in one)
  EXPECT_LE(j["points"][0]["speedup"].get<double>(), 1.0 + 1e-9);
  EXPECT_GT(j["points"][0]["speedup"].get<double>(), 0.8);
  for (const auto& p : j["points"]) {
    EXPECT_EQ(p["gpus"].get<int64_t>(),
              p["tp"].get<int64_t>() * p["pp"].get<int64_t>() * p["dp"].get<int64_t>());
    EXPECT_LE(p["efficiency"].get<double>(), 1.0 + 1e-9);
    EXPECT_GT(p["cost"].get<double>(), 0);
  }
  EXPECT_GT(j["points"][3]["speedup"].get<double>(), 1.0);
  // A point predicted faster than linear is raised to exactly linear and says so.
  for (const auto& p : j["points"])
    if (p["linear_bound"].get<bool>()) EXPECT_NEAR(p["efficiency"].get<double>(), 1.0, 1e-9);
  // every count meets a loose target: the cheapest count is the answer
  int64_t cheapest = 0;
  double least = 1e300;
  for (const auto& p : j["points"])
    if (p["cost"].get<double>() < least) least = p["cost"].get<double>(), cheapest = p["gpus"].get<int64_t>();
  EXPECT_EQ(j["best_for_target"], cheapest);
  EXPECT_TRUE(fs::exists(dir / "plot" / "scale.png"));
  EXPECT_TRUE(fs::exists(dir / "plot" / "scale.svg"));
  expect_one_error(base + "--gpus 0..8", "--gpus=\"0..8\"");
  std::string t4 = base;
  t4.replace(t4.find("a100-sxm4-40gb.json"), std::string("a100-sxm4-40gb.json").size(), "t4.json");
  expect_one_error(t4 + "--gpus 1..8", "needs a collective model");
  expect_one_error(base + "--comm " + (dir / "comm.json").string() + " --price-per-gpu-hour -1",
                   "--price-per-gpu-hour=-1 must be >= 0");
  expect_one_error(base + "--comm " + (dir / "comm.json").string() + " --target-epoch-s 10",
                   "--target-epoch-s needs --samples");
  // A slow host (--host-node-us: 5 ms per node) sets the time of one GPU.
  CliResult h =
      run_cli(base + "--comm " + (dir / "comm.json").string() + " --gpus 1..8 --host-node-us 5000 --json");
  ASSERT_EQ(h.rc, 0) << h.out;
  const auto hj = nlohmann::json::parse(h.out.substr(h.out.find('{')));
  ASSERT_EQ(hj["points"].size(), 4u);
  EXPECT_GT(hj["points"][0]["t_iter_ms"].get<double>(), j["points"][0]["t_iter_ms"].get<double>());
  expect_one_error(base + "--comm " + (dir / "comm.json").string() + " --host-node-us -2",
                   "--host-node-us=-2 must be a number in [0, 1e6]");
  scaledl::remove_tree(dir);
}

TEST(CliParallel, ExpertParallelMixturesInPredictAndScale) {
  const std::string src = SCALEDL_SOURCE_DIR;
  const fs::path dir = dir_with_comm("scaledl_ep_");
  // DeepSeek-V2-Lite (64 experts, top 6) on 8 H100s, BF16.
  const std::string base = "predict --bundle " + src + "/models/bundles/default " + src +
                           "/models/deepseek-v2-lite.json --device-spec " + src +
                           "/models/devices/h100-sxm.json --seq 2048 --batch 2 --dtype bf16 --comm " +
                           (dir / "comm.json").string() + " --gpus 8 ";
  CliResult r = run_cli(base + "--ep 8 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["plan"]["ep"], 8);
  EXPECT_EQ(j["plan"]["ep_alltoalls_per_microbatch"], 26 * 4);  // 26 sparse FFNs, 2 forward + 2 backward
  EXPECT_GT(j["t_ep_ms"].get<double>(), 0);
  CliResult d = run_cli(base + "--json");
  ASSERT_EQ(d.rc, 0) << d.out;
  const auto dj = nlohmann::json::parse(d.out.substr(d.out.find('{')));
  // Spread over 8 GPUs the experts need an eighth of the memory.
  EXPECT_LT(j["memory_per_gpu"]["peak_bytes"].get<double>(),
            dj["memory_per_gpu"]["peak_bytes"].get<double>());
  EXPECT_LT(j["plan"]["params_per_gpu"].get<double>(), 0.25 * dj["plan"]["params_per_gpu"].get<double>());
  CliResult t = run_cli(base + "--ep 8");
  ASSERT_EQ(t.rc, 0) << t.out;
  EXPECT_NE(t.out.find("(experts over ep 8 of them)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("experts      all-to-alls"), std::string::npos) << t.out;
  expect_one_error(base + "--ep 3", "--ep=3 does not divide the 64 experts of deepseek-v2-lite");
  expect_one_error("predict --bundle " + src + "/models/bundles/default " + src +
                       "/models/gpt2.json --device-spec " + src + "/models/devices/h100-sxm.json --comm " +
                       (dir / "comm.json").string() + " --gpus 2 --ep 2",
                   "--ep=2: gpt2 has no mixture of experts to spread");
  // scale tries the expert-parallel ways too, and says which it chose.
  CliResult s = run_cli("scale " + src + "/models/deepseek-v2-lite.json --bundle " + src +
                        "/models/bundles/default --device-spec " + src +
                        "/models/devices/h100-sxm.json --seq 2048 "
                        "--batch 16 --dtype bf16 --comm " +
                        (dir / "comm.json").string() + " --gpus 1..8 --json");
  ASSERT_EQ(s.rc, 0) << s.out;
  const auto sj = nlohmann::json::parse(s.out.substr(s.out.find('{')));
  for (const auto& p : sj["points"]) {
    EXPECT_EQ(p["dp"].get<int64_t>() % p["ep"].get<int64_t>(), 0) << p.dump();
  }
  scaledl::remove_tree(dir);
}
