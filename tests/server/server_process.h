// Test helpers for the HTTP server: a real `ferry serve` process on a free loopback port
// (port 0, read back from its log), and HTTP calls through cpp-httplib's client, including
// server-sent-event streams that the caller may cut off mid-way.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

extern char** environ;

namespace ferry::testing {

using json = nlohmann::json;

inline std::string FerryBinary() {
  return std::string(FERRY_BINARY_DIR) + "/bin/ferry";
}

// Runs the ferry binary to completion (for make-model); returns its exit code.
inline int RunFerry(const std::string& args) {
  return std::system((FerryBinary() + " " + args + " >/dev/null 2>&1").c_str()) == 0 ? 0 : 1;
}

class ServerProcess {
 public:
  // Starts `ferry serve ARGS --port 0` and waits (up to a minute) until it listens.
  bool Start(const std::vector<std::string>& args) {
    // Debian's httplib sends without MSG_NOSIGNAL: a write to a connection the server has
    // closed (an oversized body, a cut-off stream) must be an error here, not a killed test.
    signal(SIGPIPE, SIG_IGN);
    log_ = ScratchPath("serve_" + std::to_string(counter_++) + ".log");
    std::vector<std::string> argv = {FerryBinary(), "serve", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    const int rc = posix_spawn(&pid_, cargv[0], &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return false;
    const std::regex listening(R"(on http://127\.0\.0\.1:(\d+))");
    for (int i = 0; i < 600; ++i) {
      std::smatch m;
      const std::string log = Log();
      if (std::regex_search(log, m, listening)) {
        port_ = std::stoi(m[1].str());
        return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // Sends `sig` and waits (up to a minute) for the exit; the exit code, or -1.
  int Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    for (int i = 0; i < 600; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120);
    c.set_connection_timeout(30);
    return c;
  }

 private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

struct HttpResult {
  int status = -1;   // -1: no response
  std::string body;  // with no response: httplib's error
  httplib::Headers headers;
  json Json() const { return json::parse(body, nullptr, false); }
};

inline HttpResult Post(const ServerProcess& s, const std::string& path, const std::string& body,
                       const httplib::Headers& headers = {}) {
  httplib::Client c = s.Client();
  httplib::Result r = c.Post(path.c_str(), headers, body, "application/json");
  if (!r) return {-1, httplib::to_string(r.error()), {}};
  return {r->status, r->body, r->headers};
}
inline HttpResult Get(const ServerProcess& s, const std::string& path) {
  httplib::Client c = s.Client();
  httplib::Result r = c.Get(path.c_str());
  if (!r) return {-1, httplib::to_string(r.error()), {}};
  return {r->status, r->body, r->headers};
}

// POSTs a streaming request and hands each SSE `data:` payload to `on_event` as it arrives;
// `on_event` returning false closes the connection. Returns the HTTP status (-1: none).
inline int PostStream(const ServerProcess& s, const std::string& path, const std::string& body,
                      const std::function<bool(const std::string&)>& on_event) {
  httplib::Client c = s.Client();
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  std::string buffer;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buffer.append(data, len);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      // The data line, also after an `event: NAME` line (Anthropic's and the Responses API's events).
      const size_t data = event.rfind("data: ", 0) == 0 ? 6 : event.find("\ndata: ");
      if (data == std::string::npos) continue;
      if (!on_event(event.substr(data == 6 ? 6 : data + 7))) return false;
    }
    return true;
  };
  httplib::Result r = c.send(req);
  return r ? r->status : -1;
}

// The value of one sample on the /metrics page (first line starting with `name{` or `name `).
inline double Metric(const ServerProcess& s, const std::string& name) {
  HttpResult r = Get(s, "/metrics");
  std::istringstream in(r.body);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + "{", 0) == 0 || line.rfind(name + " ", 0) == 0)
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

}  // namespace ferry::testing
