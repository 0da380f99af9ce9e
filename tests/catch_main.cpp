// The shared Catch2 main of every unit-test program.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
