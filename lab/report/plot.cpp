#include "lab/report/plot.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "io/atomic_file.h"
#include "tensor/error.h"

extern char** environ;

namespace qkv::report {
namespace {

namespace fs = std::filesystem;

constexpr int kLineW = 560, kLineH = 400, kMapW = 260, kMapH = 250, kTitleH = 40;
constexpr auto kTimeout = std::chrono::seconds(120);  // a figure takes well under a second
constexpr const char* kInstall = "install it (Debian: apt-get install gnuplot-nox) or point QKV_GNUPLOT at it";

// Shortest text that reads back as the same double.
std::string num(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// A gnuplot single-quoted string: no escapes, macros or backquote substitution happen inside;
// a quote is doubled. Line breaks would end the command, so they become spaces.
std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "''";
    else if (c == '\n' || c == '\r' || c == '\0') q += ' ';
    else q += c;
  }
  return q + "'";
}

std::string range(const std::optional<double>& lo, const std::optional<double>& hi) {
  std::string r = "[";
  r += lo ? num(*lo) : std::string("*");
  r += ":";
  r += hi ? num(*hi) : std::string("*");
  return r + "]";
}

bool in_domain(double x, double y, const LinePanel& p) {
  return std::isfinite(x) && std::isfinite(y) && (!p.x.log || x > 0) && (!p.y.log || y > 0);
}

bool drawable(const Series& s, const LinePanel& p) {
  for (size_t i = 0; i < s.x.size(); ++i)
    if (in_domain(s.x[i], s.y[i], p)) return true;
  return false;
}

bool drawable(const HeatmapPanel& h) {
  return std::any_of(h.values.begin(), h.values.end(), [](double v) { return std::isfinite(v); });
}

void check_axis(const Axis& a, const std::string& where, const char* name) {
  for (const std::optional<double>& v : {a.min, a.max})
    if (v) check<ValueError>(std::isfinite(*v), where, ": ", name, " axis limit ", *v, " is not finite");
  if (a.min && a.max)
    check<ValueError>(*a.min < *a.max, where, ": ", name, " axis range [", *a.min, ", ", *a.max,
                      "] is empty (expected min < max)");
  if (a.log)
    check<ValueError>((!a.min || *a.min > 0) && (!a.max || *a.max > 0), where, ": ", name,
                      " axis is logarithmic, so its min and max must be > 0");
}

void validate(const Figure& f) {
  const std::string fig = cat("figure '", f.title, "'");
  check<ValueError>(f.columns >= 1, fig, ": columns is ", f.columns, ", expected at least 1");
  check<ValueError>(!f.lines.empty() || !f.heatmaps.empty(), fig, ": no panels to draw");
  for (const LinePanel& p : f.lines) {
    const std::string where = cat(fig, ", panel '", p.title, "'");
    check_axis(p.x, where, "x");
    check_axis(p.y, where, "y");
    for (const Series& s : p.series)
      check<ValueError>(s.x.size() == s.y.size(), where, ", series '", s.label, "': ", s.x.size(), " x values but ",
                        s.y.size(), " y values (expected one y per x)");
  }
  for (const HeatmapPanel& h : f.heatmaps) {
    const std::string where = cat(fig, ", heat map '", h.title, "'");
    check<ValueError>(h.rows >= 0 && h.cols >= 0, where, ": size ", h.rows, "x", h.cols, " is negative");
    check<ValueError>(uint64_t(h.values.size()) == uint64_t(h.rows) * uint64_t(h.cols), where, ": ", h.values.size(),
                      " values for ", h.rows, "x", h.cols, " cells (expected rows*cols, row-major)");
    if (h.min && h.max) check<ValueError>(*h.min < *h.max, where, ": colour range min must be < max");
  }
}

std::string csv_of(const Figure& f) {
  std::string out = "panel,series,x,y,value\n";
  for (const LinePanel& p : f.lines)
    for (const Series& s : p.series)
      for (size_t i = 0; i < s.x.size(); ++i) {
        out += csv_field(p.title) + "," + csv_field(s.label) + ",";
        out += (std::isfinite(s.x[i]) ? num(s.x[i]) : std::string()) + ",";
        out += (std::isfinite(s.y[i]) ? num(s.y[i]) : std::string()) + ",\n";
      }
  for (const HeatmapPanel& h : f.heatmaps)
    for (int64_t r = 0; r < h.rows; ++r)
      for (int64_t c = 0; c < h.cols; ++c) {
        const double v = h.values[size_t(r * h.cols + c)];
        out += csv_field(h.title) + ",," + std::to_string(c) + "," + std::to_string(r) + ",";
        out += (std::isfinite(v) ? num(v) : std::string()) + "\n";
      }
  return out;
}

// Line styles by order of first appearance of a series label in the figure.
std::map<std::string, size_t> label_order(const Figure& f) {
  std::map<std::string, size_t> order;
  for (const LinePanel& p : f.lines)
    for (const Series& s : p.series) order.emplace(s.label, order.size());
  return order;
}

std::string line_style(size_t k) {
  static const std::array<const char*, 10> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                                       "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return cat("lc rgb '", kPalette[k % kPalette.size()], "' dt ", 1 + k / kPalette.size());
}

// Inline data blocks: $l<panel>s<series> holds "x y" rows with one blank line at each gap;
// $h<panel> holds a heat map's matrix.
std::string data_blocks(const Figure& f) {
  std::string out;
  for (size_t p = 0; p < f.lines.size(); ++p)
    for (size_t k = 0; k < f.lines[p].series.size(); ++k) {
      const Series& s = f.lines[p].series[k];
      if (!drawable(s, f.lines[p])) continue;
      out += cat("$l", p, "s", k, " << EOD\n");
      bool gap = false, any = false;
      for (size_t i = 0; i < s.x.size(); ++i) {
        if (!in_domain(s.x[i], s.y[i], f.lines[p])) {
          gap = any;
          continue;
        }
        if (gap) out += "\n";
        gap = false;
        any = true;
        out += num(s.x[i]) + " " + num(s.y[i]) + "\n";
      }
      out += "EOD\n";
    }
  for (size_t m = 0; m < f.heatmaps.size(); ++m) {
    const HeatmapPanel& h = f.heatmaps[m];
    if (!drawable(h)) continue;
    out += cat("$h", m, " << EOD\n");
    for (int64_t r = 0; r < h.rows; ++r) {
      for (int64_t c = 0; c < h.cols; ++c) {
        const double v = h.values[size_t(r * h.cols + c)];
        if (c) out += ' ';
        out += std::isfinite(v) ? num(v) : std::string("NaN");
      }
      out += "\n";
    }
    out += "EOD\n";
  }
  return out;
}

// A legend entry short enough not to run into the next panel (the CSV has the whole label); cut
// at a UTF-8 character boundary.
std::string legend_text(const std::string& label) {
  constexpr size_t kMax = 40;
  if (label.size() <= kMax) return label;
  size_t end = kMax - 3;
  while (end > 0 && (uint8_t(label[end]) & 0xC0) == 0x80) --end;
  return label.substr(0, end) + "...";
}

// Whether x ticks go at every whole number: the x values are few whole numbers (epochs), where
// gnuplot's own ticks would put some between them.
bool whole_steps(const LinePanel& p) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : p.series)
    for (double x : s.x) {
      if (!std::isfinite(x)) continue;
      if (x != std::round(x)) return false;
      lo = std::min(lo, x), hi = std::max(hi, x);
    }
  return !p.x.log && !p.x.min && !p.x.max && hi - lo <= 12;
}

// A panel without anything to plot: its frame, title and a note.
std::string empty_panel() {
  return "unset logscale\nset xrange [0:1] noreverse\nset yrange [0:1] noreverse\nunset xtics\nunset ytics\n"
         "unset colorbox\nunset key\nset label 1 'no data' at graph 0.5,0.5 center\nplot 2 notitle\n"
         "unset label 1\nset xtics\nset ytics\n";
}

std::string line_panel(const LinePanel& p, size_t index, const std::map<std::string, size_t>& order) {
  std::string out = cat("set title ", quoted(p.title), "\nset xlabel ", quoted(p.x.label), "\nset ylabel ",
                        quoted(p.y.label), "\nset size noratio\nset grid\n");
  std::string plots;
  for (size_t k = 0; k < p.series.size(); ++k) {
    const Series& s = p.series[k];
    if (!drawable(s, p)) continue;
    const char* with = s.x.size() > 40 ? "lines lw 2" : "linespoints lw 2 pt 7 ps 0.6";
    plots += cat(plots.empty() ? "plot " : ", \\\n     ", "$l", index, "s", k, " using 1:2 with ", with, " ",
                 line_style(order.at(s.label)), " ",
                 s.label.empty() ? "notitle" : cat("title ", quoted(legend_text(s.label))));
  }
  if (plots.empty()) return out + empty_panel();
  // The ranges before the log scale: a log axis over the last panel's range (a heat map's,
  // through 0) makes gnuplot warn.
  out += cat("unset logscale\nset xrange ", range(p.x.min, p.x.max), " noreverse\nset yrange ", range(p.y.min, p.y.max),
             " noreverse\n");
  if (p.x.log) out += "set logscale x\n";
  if (p.y.log) out += "set logscale y\n";
  out += cat("set xtics ", whole_steps(p) ? "1" : "autofreq", "\nset ytics autofreq\nunset colorbox\n",
             "set key outside right top vertical Left reverse samplen 2 font ',9'\n");
  return out + plots + "\n";
}

std::string heatmap_panel(const HeatmapPanel& h, size_t index) {
  if (h.rows == 0 || h.cols == 0) return "set multiplot next\n";
  std::string out = cat("set title ", quoted(h.title), "\nset xlabel ", quoted(h.x_label), "\nset ylabel ",
                        quoted(h.y_label), "\nunset grid\n");
  if (!drawable(h)) return out + "set size noratio\n" + empty_panel();
  const int64_t xstep = std::max<int64_t>(1, (h.cols + 4) / 5), ystep = std::max<int64_t>(1, (h.rows + 4) / 5);
  out += cat("unset logscale\nset size ratio -1\nset xrange [-0.5:", h.cols - 0.5, "] noreverse\nset yrange [",
             h.rows - 0.5, ":-0.5] noreverse\nset xtics 0,", xstep, ",", h.cols - 1, "\nset ytics 0,", ystep, ",",
             h.rows - 1, "\nset cbrange ", range(h.min, h.max), "\nset colorbox\nset cbtics font ',8'\nunset key\n");
  return out + cat("plot $h", index, " matrix with image notitle\n");
}

std::array<int, 2> pixel_size(const Figure& f) {
  const size_t panels = f.lines.size() + f.heatmaps.size(), columns = size_t(f.columns);
  const size_t rows = (panels + columns - 1) / columns;
  const int w = f.lines.empty() ? kMapW : kLineW, h = f.lines.empty() ? kMapH : kLineH;
  return {int(columns) * w, int(rows) * h + kTitleH};
}

}  // namespace

std::string gnuplot_script(const Figure& f, const fs::path& png, const fs::path& svg, const fs::path& pdf) {
  validate(f);
  const auto [w, h] = pixel_size(f);
  const size_t panels = f.lines.size() + f.heatmaps.size(), columns = size_t(f.columns);
  const std::map<std::string, size_t> order = label_order(f);
  std::string body = cat("set multiplot layout ", (panels + columns - 1) / columns, ",", columns, " title ",
                         quoted(f.title), " font ',13'\n");
  for (size_t p = 0; p < f.lines.size(); ++p) body += line_panel(f.lines[p], p, order);
  for (size_t m = 0; m < f.heatmaps.size(); ++m) body += heatmap_panel(f.heatmaps[m], m);
  body += "unset multiplot\nunset output\n";
  // Cairo terminals take the font in points at 72 dpi: a page of w/72 inches matches the PNG.
  std::string s = cat("# qkvlab figure\nset encoding utf8\n", data_blocks(f));
  s += "set palette defined (0 '#440154', 0.25 '#3b528b', 0.5 '#21918c', 0.75 '#5ec962', 1 '#fde725')\n";
  s += "set style fill solid\nset tics nomirror\nset border 3\n";
  s += cat("set terminal pngcairo size ", w, ",", h, " font 'sans,10' noenhanced background '#ffffff'\n");
  s += cat("set output ", quoted(png.string()), "\n", body);
  s += cat("set terminal svg size ", w, ",", h, " font 'sans,10' noenhanced background '#ffffff'\n");
  s += cat("set output ", quoted(svg.string()), "\n", body);
  s += cat("set terminal pdfcairo size ", num(w / 72.0), ",", num(h / 72.0), " font 'sans,10' noenhanced\n");
  s += cat("set output ", quoted(pdf.string()), "\n", body);
  return s;
}

namespace {

bool executable_file(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

std::string requested_gnuplot() {
  const char* env = std::getenv("QKV_GNUPLOT");
  return env && *env ? std::string(env) : std::string("gnuplot");
}

// Why gnuplot_executable() came back empty, for the error message.
std::string missing_reason() {
  const char* env = std::getenv("QKV_GNUPLOT");
  if (env && *env) return cat("QKV_GNUPLOT=", env, " is not an executable file");
  return "`gnuplot` was not found in PATH";
}

// A private folder (mode 0700) for the script and gnuplot's messages, removed with everything in it.
struct PrivateDir {
  fs::path path;
  PrivateDir() {
    remove_dead_folders();
    std::string tmpl = (fs::temp_directory_path() / cat("qkvlab-plot-", ::getpid(), "-XXXXXX")).string();
    check<IOError>(::mkdtemp(tmpl.data()) != nullptr, "gnuplot: cannot create a temporary folder ", tmpl, ": ",
                   std::strerror(errno));
    path = tmpl;
  }
  ~PrivateDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  // The folders of processes killed while drawing (their pid is in the name).
  static void remove_dead_folders() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with("qkvlab-plot-")) continue;
      const long pid = std::strtol(name.c_str() + 12, nullptr, 10);
      if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
    }
  }
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
};

// Temporary outputs beside their targets, removed unless they were renamed into place.
struct PendingOutputs {
  std::vector<std::pair<fs::path, fs::path>> files;  // (temporary, target)
  ~PendingOutputs() {
    std::error_code ec;
    for (const auto& f : files) fs::remove(f.first, ec);
  }
};

std::string tail_of(const fs::path& file, size_t limit) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return "(it printed nothing)";
  return s.size() > limit ? cat("...", s.substr(s.size() - limit)) : s;
}

// Runs `exe script` with stdin from /dev/null and stdout and stderr into `log`, and HOME set to
// `home` so that no ~/.gnuplot changes the figure; returns the wait status, or throws when it
// cannot start or runs past the time limit (it is then killed).
int run_gnuplot(const fs::path& exe, const fs::path& script, const fs::path& log, const fs::path& home) {
  std::vector<std::string> env_text;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "HOME=", 5) != 0) env_text.emplace_back(*e);
  env_text.push_back(cat("HOME=", home.string()));
  std::vector<char*> env;
  for (std::string& e : env_text) env.push_back(e.data());
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::string arg0 = exe.string(), arg1 = script.string();
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  const int err = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&actions);
  check<IOError>(err == 0, "gnuplot: cannot run ", exe.string(), ": ", std::strerror(err), "; ", kInstall);
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  auto nap = std::chrono::milliseconds(1);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) throw IOError(cat("gnuplot: waiting for ", exe.string(), ": ", std::strerror(errno)));
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
      throw IOError(cat("gnuplot: ", exe.string(), " ran longer than ", kTimeout.count(), " s and was stopped"));
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::milliseconds(20));
  }
}

void sync_file(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

fs::path gnuplot_executable() {
  const std::string name = requested_gnuplot();
  if (name.find('/') != std::string::npos) return executable_file(name) ? fs::path(name) : fs::path();
  const char* path_env = std::getenv("PATH");
  std::stringstream dirs(path_env ? path_env : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (executable_file(candidate)) return candidate;
  }
  return {};
}

bool gnuplot_available() { return !gnuplot_executable().empty(); }

FigureFiles write_figure(const Figure& f, const fs::path& stem_in) {
  validate(f);
  check<ValueError>(stem_in.string().find_first_of(std::string("\n\r\0", 3)) == std::string::npos,
                    "write_figure: the path ", stem_in.string(),
                    " has a line break or NUL (expected a plain file name)");
  fs::path stem = stem_in;
  for (const char* ext : {".png", ".svg", ".pdf", ".csv"})
    if (stem.extension() == ext) stem.replace_extension();
  const auto with = [&](const char* ext) { return fs::path(stem.string() + ext); };
  FigureFiles files{with(".png"), with(".svg"), with(".pdf"), with(".csv")};
  const std::string csv = csv_of(f);
  write_file_atomically(files.csv.string(), [&](std::ostream& os) { os << csv; });

  const std::string what =
      cat("cannot draw ", stem.string(), ".png/.svg/.pdf (the data is in ", files.csv.string(), ")");
  const fs::path exe = gnuplot_executable();
  if (exe.empty()) throw GnuplotMissing(cat("gnuplot: ", what, ": ", missing_reason(), "; ", kInstall));
  // gnuplot draws into its private folder: a gnuplot left running by a killed qkvlab never writes
  // beside the targets. The drawings are then copied to temporary names there and renamed.
  PrivateDir dir;
  const fs::path script = dir.path / "figure.gp", log = dir.path / "gnuplot.log";
  const std::array<fs::path, 3> targets{files.png, files.svg, files.pdf};
  const std::array<fs::path, 3> drawn{dir.path / "figure.png", dir.path / "figure.svg", dir.path / "figure.pdf"};
  {
    std::ofstream os(script, std::ios::binary);
    os << gnuplot_script(f, drawn[0], drawn[1], drawn[2]);
    check<IOError>(bool(os.flush()), "gnuplot: cannot write the script ", script.string());
  }
  const int status = run_gnuplot(exe, script, log, dir.path);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFEXITED(status) ? cat("exit status ", WEXITSTATUS(status))
                                              : cat("killed by signal ", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    throw IOError(cat("gnuplot: ", what, ": ", exe.string(), " failed (", how, "): ", tail_of(log, 2000)));
  }
  PendingOutputs outputs;
  for (size_t i = 0; i < targets.size(); ++i) {
    std::error_code ec;
    if (fs::file_size(drawn[i], ec) == 0 || ec)
      throw IOError(cat("gnuplot: ", what, ": ", exe.string(), " wrote no ", targets[i].extension().string(),
                        " file: ", tail_of(log, 2000)));
    remove_dead_temp_files_for(targets[i]);  // what a killed drawing of this figure left
    outputs.files.push_back({temp_file_for(targets[i]), targets[i]});
    fs::copy_file(drawn[i], outputs.files.back().first, ec);
    check<IOError>(!ec, "gnuplot: cannot write ", outputs.files.back().first.string(), ": ", ec.message());
    sync_file(outputs.files.back().first);
  }
  for (const auto& [temp, target] : outputs.files) {
    std::error_code ec;
    fs::rename(temp, target, ec);
    check<IOError>(!ec, "gnuplot: cannot move the drawn figure to ", target.string(), ": ", ec.message());
  }
  outputs.files.clear();
  return files;
}

void write_study_figure(const Figure& f, const fs::path& stem, std::FILE* log, const std::string& who) {
  try {
    const FigureFiles files = write_figure(f, stem);
    std::fprintf(log, "%s: figure %s (.svg, .pdf; data in %s)\n", who.c_str(), files.png.string().c_str(),
                 files.csv.string().c_str());
  } catch (const IOError& e) {  // no gnuplot: the tables stand without the figure
    std::fprintf(log, "%s: no figure: %s\n", who.c_str(), e.what());
  }
}

}  // namespace qkv::report
