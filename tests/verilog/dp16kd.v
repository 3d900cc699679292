// A behavioural model of the ECP5 DP16KD block RAM, for tests only: the subset
// hdl/bram.py uses (port A writes, port B reads; widths 1, 2, 4, 9, 18; REGMODE_B NOREG or
// OUTREG; no chip selects, no resets, no initial contents), written from Lattice's ECP5
// memory usage guide (TN1264): x1 words are addressed by AD13..AD0, x2 by AD13..AD1, x4 by
// AD13..AD2, x9 by AD13..AD3, x18 by AD13..AD4 (AD1..AD0 are then the write's byte enables). The read latch takes the addressed word at a rising edge of CLKB
// with CEB high; with REGMODE_B = "OUTREG" the output register takes the latch at a rising
// edge with OCEB high, and DOB shows the register; with "NOREG" DOB shows the latch.
module DP16KD #(
    parameter integer DATA_WIDTH_A = 18,
    parameter integer DATA_WIDTH_B = 18,
    parameter REGMODE_A = "NOREG",
    parameter REGMODE_B = "NOREG",
    parameter RESETMODE = "SYNC",
    parameter ASYNC_RESET_RELEASE = "SYNC",
    parameter CSDECODE_A = "0b000",
    parameter CSDECODE_B = "0b000",
    parameter WRITEMODE_A = "NORMAL",
    parameter WRITEMODE_B = "NORMAL",
    parameter GSR = "ENABLED"
) (
    input DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9,
    input DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0,
    input ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4,
    input ADA3, ADA2, ADA1, ADA0,
    input CEA, OCEA, CLKA, WEA, CSA2, CSA1, CSA0, RSTA,
    input DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9,
    input DIB8, DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0,
    input ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4,
    input ADB3, ADB2, ADB1, ADB0,
    input CEB, OCEB, CLKB, WEB, CSB2, CSB1, CSB0, RSTB,
    output DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9,
    output DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0,
    output DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9,
    output DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0
);
    localparam integer SHIFT_A = DATA_WIDTH_A == 18 ? 4 : DATA_WIDTH_A == 9 ? 3 :
                                 DATA_WIDTH_A == 4 ? 2 : DATA_WIDTH_A == 2 ? 1 : 0;
    localparam integer SHIFT_B = DATA_WIDTH_B == 18 ? 4 : DATA_WIDTH_B == 9 ? 3 :
                                 DATA_WIDTH_B == 4 ? 2 : DATA_WIDTH_B == 2 ? 1 : 0;
    localparam integer WORDS = 16384 >> SHIFT_A;

    wire [17:0] dia = {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9,
                       DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
    wire [13:0] ada = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4,
                       ADA3, ADA2, ADA1, ADA0};
    wire [13:0] adb = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4,
                       ADB3, ADB2, ADB1, ADB0};
    reg [17:0] mem [0:WORDS - 1];
    reg [17:0] latch_b = 18'bx, out_b = 18'bx;
    wire [17:0] dob = REGMODE_B == "OUTREG" ? out_b : latch_b;

    always @(posedge CLKA)
        if (CEA && WEA && (DATA_WIDTH_A != 18 || (ADA1 && ADA0)))
            mem[ada >> SHIFT_A] <= dia;
    always @(posedge CLKB) begin
        if (CEB) latch_b <= mem[adb >> SHIFT_B];
        if (OCEB) out_b <= latch_b;
    end

    assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9,
            DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0} = dob;
    assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9,
            DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0} = 18'b0;
endmodule
