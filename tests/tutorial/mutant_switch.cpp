// The run-time switch of `tutorial_mutant` (tests/tutorial/mutants.py): the copies of the
// exercises' sources that mutants.py generates call this to choose between the real code
// and one wrong answer, named by the environment variable ST_TUTORIAL_MUTANT.
#include <cstdlib>
#include <cstring>

bool st_tutorial_mutant(const char* name) {
  static const char* chosen = std::getenv("ST_TUTORIAL_MUTANT");
  return chosen != nullptr && std::strcmp(chosen, name) == 0;
}
