library(testthat)
library(circuitbreaker)

test_check("circuitbreaker")
