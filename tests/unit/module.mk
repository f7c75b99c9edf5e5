# tests/unit/NAME_test.c -> $(BUILD)/tests/NAME_test (cmocka)
UNIT_TESTS += $(basename $(notdir $(wildcard tests/unit/*_test.c)))
