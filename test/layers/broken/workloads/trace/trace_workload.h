// Fixture: a test library outside the tests.
#pragma once

#include <gtest/gtest.h>
