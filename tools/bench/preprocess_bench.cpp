// Vision preprocessing time per item, Qwen2-VL / Qwen2.5-VL processors (the counterpart of
// tools/bench/preprocess_bench.py, which times transformers' processors on the same inputs).
//
//   preprocess_bench --config tools/bench/configs/qwen2.5-vl --image /tmp/vlbench/image_1920x1080.jpg
//                    [--video /tmp/vlbench/video_30s_720p.mp4] [--reps 20] [--video-reps 3]
//                    [--threads 2] [--json out.json]
//
// Image: read the file + media::decode_image + qwen_vl::process_image (and, apart, the resize alone).
// Video: read the file + media::probe_video + frame sampling (the config's fps, min/max frames) +
//        media::decode_video_frames of the sampled frames + qwen_vl::process_video.
// One untimed warm-up, then --reps repetitions; prints median and min per stage and in total (ms),
// and writes JSON. Wall time, plus the process CPU time of the total (all threads): on a busy machine
// the CPU time is the steadier figure.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "media/image.h"
#include "media/video.h"
#include "models/qwen_vl/image_processor.h"
#include "models/qwen_vl/processor_config.h"
#include "models/qwen_vl/resize.h"
#include "models/qwen_vl/video_processor.h"

namespace {

namespace qvl = loom::models::qwen_vl;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// CPU time of the whole process (all threads), ms: on a shared machine it is less disturbed by
// other jobs than wall time (with one thread it is the work itself).
double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "preprocess_bench: %s\n", msg.c_str());
  std::exit(2);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return {s.begin(), s.end()};
}

struct Args {
  std::string config, image, video, json_out;
  int reps = 20, video_reps = 3, threads = 0;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(k + " needs a value");
      return argv[++i];
    };
    if (k == "--config")
      a.config = value();
    else if (k == "--image")
      a.image = value();
    else if (k == "--video")
      a.video = value();
    else if (k == "--json")
      a.json_out = value();
    else if (k == "--reps")
      a.reps = std::stoi(value());
    else if (k == "--video-reps")
      a.video_reps = std::stoi(value());
    else if (k == "--threads")
      a.threads = std::stoi(value());
    else
      die("unknown argument " + k + " (see the comment at the top of preprocess_bench.cpp)");
  }
  if (a.config.empty() || (a.image.empty() && a.video.empty()))
    die("--config and --image and/or --video are required");
  if (a.reps < 1 || a.video_reps < 1) die("--reps and --video-reps must be >= 1");
  return a;
}

// Per-stage samples (ms) of the timed repetitions.
struct Stages {
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> ms;
  void add(const std::string& stage, double v) {
    if (!ms.count(stage)) order.push_back(stage);
    ms[stage].push_back(v);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

json report(const std::string& item, const Stages& s, const json& extra) {
  json j = extra;
  j["item"] = item;
  std::printf("%-8s %-28s %10s %10s\n", item.c_str(), "stage", "median ms", "min ms");
  for (const auto& stage : s.order) {
    const auto& v = s.ms.at(stage);
    const double med = median(v), mn = *std::min_element(v.begin(), v.end());
    std::printf("%-8s %-28s %10.2f %10.2f\n", "", stage.c_str(), med, mn);
    j["stages"][stage] = {{"median_ms", med}, {"min_ms", mn}, {"samples_ms", v}};
  }
  return j;
}

json bench_image(const Args& a, const qvl::ImageProcessorConfig& cfg) {
  Stages s;
  json extra;
  for (int rep = -1; rep < a.reps; ++rep) {  // rep -1: warm-up
    const double c0 = cpu_ms();
    const auto t0 = Clock::now();
    const std::vector<uint8_t> bytes = read_bytes(a.image);
    auto img = loom::media::decode_image(bytes);
    if (!img.ok()) die(a.image + ": " + img.status().to_string());
    const double t_decode = ms_since(t0);
    const auto t1 = Clock::now();
    auto p = qvl::process_image(img->rgb.data(), img->width, img->height, cfg, a.threads);
    if (!p.ok()) die(a.image + ": " + p.status().to_string());
    const double t_process = ms_since(t1), t_total = ms_since(t0), c_total = cpu_ms() - c0;
    if (rep < 0) {
      extra = {{"width", img->width},
               {"height", img->height},
               {"grid_thw", p->grid_thw},
               {"tokens", p->num_tokens()},
               {"pixel_values_shape", {p->pixel_values.dim(0), p->pixel_values.dim(1)}}};
      continue;
    }
    s.add("read+decode_image", t_decode);
    s.add("process_image", t_process);
    s.add("total", t_total);
    s.add("total, process CPU time", c_total);
    // Breakdown (not part of total): the resize alone, as process_image runs it.
    auto hw = qvl::smart_resize(img->height, img->width, cfg.factor(), cfg.min_pixels, cfg.max_pixels);
    if (hw.ok() && (hw->first != img->height || hw->second != img->width)) {
      const auto t2 = Clock::now();
      auto r = qvl::resize_bicubic_aa_u8(img->rgb.data(), img->width, img->height, 3,
                                         static_cast<int32_t>(hw->second), static_cast<int32_t>(hw->first),
                                         a.threads);
      s.add("(of which resize alone)", ms_since(t2));
    }
  }
  return report("image", s, extra);
}

json bench_video(const Args& a, const qvl::VideoProcessorConfig& cfg) {
  loom::media::FrameSampling fs;
  fs.fps = cfg.fps.value_or(2.0);
  fs.min_frames = cfg.min_frames;
  fs.max_frames = cfg.max_frames;
  fs.temporal_patch_size = cfg.image.temporal_patch_size;
  fs.num_frames = cfg.num_frames.value_or(0);
  Stages s;
  json extra;
  for (int rep = -1; rep < a.video_reps; ++rep) {
    const double c0 = cpu_ms();
    const auto t0 = Clock::now();
    const std::vector<uint8_t> bytes = read_bytes(a.video);
    auto info = loom::media::probe_video(bytes);
    if (!info.ok()) die(a.video + ": " + info.status().to_string());
    auto idx = loom::media::qwen_sample_frame_indices(*info, fs);
    if (!idx.ok()) die(a.video + ": " + idx.status().to_string());
    const double t_probe = ms_since(t0);
    const auto t1 = Clock::now();
    auto frames = loom::media::decode_video_frames(bytes, *idx);
    if (!frames.ok()) die(a.video + ": " + frames.status().to_string());
    const double t_decode = ms_since(t1);
    const auto t2 = Clock::now();
    std::vector<const uint8_t*> ptrs;
    for (const auto& f : *frames) ptrs.push_back(f.image.rgb.data());
    auto p =
        qvl::process_video(ptrs, frames->front().image.width, frames->front().image.height, cfg, a.threads);
    if (!p.ok()) die(a.video + ": " + p.status().to_string());
    const double t_process = ms_since(t2), t_total = ms_since(t0), c_total = cpu_ms() - c0;
    if (rep < 0) {
      extra = {{"width", info->width},
               {"height", info->height},
               {"fps", info->fps},
               {"num_frames", info->num_frames},
               {"sampled_frames", idx->size()},
               {"grid_thw", p->grid_thw},
               {"tokens", p->num_tokens()},
               {"pixel_values_shape", {p->pixel_values.dim(0), p->pixel_values.dim(1)}}};
      continue;
    }
    s.add("read+probe+sample", t_probe);
    s.add("decode_sampled_frames", t_decode);
    s.add("process_video", t_process);
    s.add("total", t_total);
    s.add("total, process CPU time", c_total);
  }
  return report("video", s, extra);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  json out = {{"tool", "loom preprocess_bench"}, {"threads", a.threads}, {"config", a.config}};
  if (!a.image.empty()) {
    auto cfg = qvl::load_image_processor_config(a.config);
    if (!cfg.ok()) die(cfg.status().to_string());
    out["image"] = bench_image(a, *cfg);
    out["image"]["path"] = a.image;
    out["image"]["reps"] = a.reps;
  }
  if (!a.video.empty()) {
    auto cfg = qvl::load_video_processor_config(a.config);
    if (!cfg.ok()) die(cfg.status().to_string());
    out["video"] = bench_video(a, *cfg);
    out["video"]["path"] = a.video;
    out["video"]["reps"] = a.video_reps;
  }
  if (!a.json_out.empty()) {
    std::ofstream(a.json_out) << out.dump(2) << "\n";
    std::printf("wrote %s\n", a.json_out.c_str());
  }
  return 0;
}
