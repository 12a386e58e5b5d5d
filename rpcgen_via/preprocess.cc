#include "rpcgen_via/preprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rpcgen_via/code_writer.h"

extern char** environ;

namespace san::rpcgen {

bool Preprocess(const PreprocessRequest& request, std::string* output, std::string* error) {
  const std::string cpp =
      request.cpp_dir.empty() ? std::string("cpp") : Cat(request.cpp_dir, "/cpp");
  std::vector<std::string> args = {cpp, "-C"};
  for (const std::string& d : request.defines) args.push_back(Cat("-D", d));
  args.push_back(request.input);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    *error = Cat("pipe: ", strerror(errno));
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
  pid_t pid = -1;
  const int rc = request.cpp_dir.empty()
                     ? posix_spawnp(&pid, cpp.c_str(), &actions, nullptr, argv.data(), environ)
                     : posix_spawn(&pid, cpp.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    *error = Cat("cannot run the C preprocessor '", cpp, "': ", strerror(rc));
    return false;
  }
  output->clear();
  char buf[65536];
  while (true) {
    const ssize_t n = read(pipefd[0], buf, sizeof buf);
    if (n > 0) {
      output->append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = Cat("the C preprocessor failed on '", request.input, "'");
    return false;
  }
  return true;
}

}  // namespace san::rpcgen
