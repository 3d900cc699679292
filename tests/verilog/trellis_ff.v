// A behavioural model of the ECP5 TRELLIS_FF flip-flop, for tests only: the subset
// hdl/bram.py's register copies use (rising clock, clock enable, no set or reset: LSR tied
// low), starting at 0 as REGSET = "RESET" does after configuration.
module TRELLIS_FF #(
    parameter GSR = "ENABLED",
    parameter CEMUX = "1",
    parameter CLKMUX = "CLK",
    parameter LSRMUX = "LSR",
    parameter REGSET = "RESET",
    parameter SRMODE = "LSR_OVER_CE"
) (
    input CLK, CE, LSR, DI,
    output reg Q
);
    initial Q = 1'b0;
    always @(posedge CLK)
        if (CE) Q <= DI;
endmodule
