C     collcheck_f77: exact checks of collectives called through the
C     Fortran 77 bindings (include 'mpif.h'): MPI_BCAST, MPI_ALLREDUCE
C     and MPI_REDUCE with INTEGER, REAL and DOUBLE PRECISION data,
C     MPI_SUM, MPI_MAX and MPI_MIN, MPI_IN_PLACE, every root, on
C     MPI_COMM_WORLD, a dup of it and communicators made by
C     MPI_COMM_SPLIT (uneven groups, reversed keys). Every rank
C     computes the expected result itself from small integers (quarters
C     for DOUBLE PRECISION), exact in every reduction order.
C
C     The A and B buffers are each one block of memory seen as INTEGER,
C     REAL or DOUBLE PRECISION (EQUIVALENCE); MPI gets its first element
C     and the datatype, so every call of an MPI routine passes the same
C     Fortran type (gfortran 10 and later reject mixed types in a file).
C
C     Usage: collcheck_f77 [MAXCOUNT]   (largest count, default 65539;
C     the counts are 0, 1, 7, 1021, 4099, 65539 and 262147, up to
C     MAXCOUNT)
C
C     Rank 0 prints "collcheck_f77: N cases ok"; a mismatch is
C     described on stderr (unit 0) and the job ends with MPI_ABORT.
      PROGRAM CCF77
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER MAXN
      PARAMETER (MAXN = 262147)
      INTEGER IA(MAXN), IB(MAXN)
      REAL RA(MAXN), RB(MAXN)
      DOUBLE PRECISION DA(MAXN), DB(MAXN), EX(MAXN)
      COMMON /CCBUF/ DA, DB, EX
      EQUIVALENCE (DA(1), RA(1), IA(1)), (DB(1), RB(1), IB(1))
      INTEGER NCASES, SALT, WRANK
      CHARACTER*32 CNAME
      COMMON /CCSTAT/ NCASES, SALT, WRANK
      COMMON /CCNAME/ CNAME
      INTEGER IERR, WSIZE, COLOR, IC, T, O, ROOT, NP, ME
      INTEGER COMMS(5), COUNTS(7), NCOMM, IP, NC, MAXC, I
      CHARACTER*32 NAMES(5), ARG
      DATA COUNTS /0, 1, 7, 1021, 4099, 65539, 262147/

      CALL MPI_INIT(IERR)
      CALL MPI_COMM_RANK(MPI_COMM_WORLD, WRANK, IERR)
      CALL MPI_COMM_SIZE(MPI_COMM_WORLD, WSIZE, IERR)
      MAXC = 65539
      IF (COMMAND_ARGUMENT_COUNT() .GE. 1) THEN
         CALL GET_COMMAND_ARGUMENT(1, ARG)
         READ (ARG, *, IOSTAT=IERR) MAXC
         IF (IERR .NE. 0 .OR. MAXC .LT. 0 .OR. MAXC .GT. MAXN) THEN
            IF (WRANK .EQ. 0) WRITE (0, '(A,I0,3A)')
     &           'collcheck_f77: MAXCOUNT must be a count up to ',
     &           MAXN, ', not "', ARG(1:LEN_TRIM(ARG)), '"'
            CALL MPI_FINALIZE(IERR)
            STOP 2
         END IF
      END IF
      NC = 0
      DO 5 I = 1, 7
         IF (COUNTS(I) .LE. MAXC) NC = NC + 1
    5 CONTINUE
      NCASES = 0
      NCOMM = 5
      COMMS(1) = MPI_COMM_WORLD
      NAMES(1) = 'MPI_COMM_WORLD'
      CALL MPI_COMM_DUP(MPI_COMM_WORLD, COMMS(2), IERR)
      NAMES(2) = 'dup(world)'
      COLOR = 0
      IF (MOD(WRANK * 5 + 1, 8) .LT. 3) COLOR = 1
      CALL MPI_COMM_SPLIT(MPI_COMM_WORLD, COLOR, WRANK, COMMS(3), IERR)
      NAMES(3) = 'split-uneven'
      CALL MPI_COMM_SPLIT(MPI_COMM_WORLD, COLOR, -WRANK, COMMS(4),
     &     IERR)
      NAMES(4) = 'split-uneven-reversed-keys'
      CALL MPI_COMM_SPLIT(MPI_COMM_WORLD, 0, WSIZE - WRANK, COMMS(5),
     &     IERR)
      NAMES(5) = 'world-reversed'

      DO 50 IC = 1, NCOMM
         CNAME = NAMES(IC)
         SALT = IC * 100000
         CALL MPI_COMM_RANK(COMMS(IC), ME, IERR)
         CALL MPI_COMM_SIZE(COMMS(IC), NP, IERR)
         DO 40 T = 1, 3
C           every root, with counts and operations cycling through the
C           lists
            DO 20 ROOT = 0, NP - 1
               CALL DOBC(COMMS(IC), T, COUNTS(1 + MOD(ROOT + T, NC)),
     &              ROOT)
               CALL DORED(COMMS(IC), T, 1 + MOD(ROOT + T, 3),
     &              COUNTS(1 + MOD(2 * ROOT + T + 1, NC)), ROOT,
     &              MOD(ROOT + 1, 2))
   20       CONTINUE
            DO 30 O = 1, 3
               DO 25 IP = 0, 1
                  CALL DOALL(COMMS(IC), T, O,
     &                 COUNTS(1 + MOD(3 * O + IP + T, NC)), IP)
   25          CONTINUE
   30       CONTINUE
   40    CONTINUE
   50 CONTINUE

      DO 60 IC = 2, NCOMM
         CALL MPI_COMM_FREE(COMMS(IC), IERR)
   60 CONTINUE
      IF (WRANK .EQ. 0) WRITE (*, '(A,I0,A)') 'collcheck_f77: ',
     &     NCASES, ' cases ok'
      CALL MPI_FINALIZE(IERR)
      END

C     input element I of rank R in case C, as a DOUBLE PRECISION value
      DOUBLE PRECISION FUNCTION VAL(C, R, I, T)
      IMPLICIT NONE
      INTEGER C, R, I, T, K
      K = MOD(I * 7 + R * 13 + C * 5, 2001) - 1000
      VAL = DBLE(K)
      IF (T .EQ. 3) VAL = DBLE(K) / 4D0
      END

      INTEGER FUNCTION MTYPE(T)
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER T
      MTYPE = MPI_DOUBLE_PRECISION
      IF (T .EQ. 1) MTYPE = MPI_INTEGER
      IF (T .EQ. 2) MTYPE = MPI_REAL
      END

      INTEGER FUNCTION MOP(O)
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER O
      MOP = MPI_MIN
      IF (O .EQ. 1) MOP = MPI_SUM
      IF (O .EQ. 2) MOP = MPI_MAX
      END

C     fill the A buffers with rank R's input of the current case
      SUBROUTINE FILL(T, R, N)
      IMPLICIT NONE
      INTEGER MAXN
      PARAMETER (MAXN = 262147)
      INTEGER IA(MAXN), IB(MAXN)
      REAL RA(MAXN), RB(MAXN)
      DOUBLE PRECISION DA(MAXN), DB(MAXN), EX(MAXN)
      COMMON /CCBUF/ DA, DB, EX
      EQUIVALENCE (DA(1), RA(1), IA(1)), (DB(1), RB(1), IB(1))
      INTEGER NCASES, SALT, WRANK
      COMMON /CCSTAT/ NCASES, SALT, WRANK
      INTEGER T, R, N, I
      DOUBLE PRECISION VAL
      DO 10 I = 1, N
         IF (T .EQ. 1) THEN
            IA(I) = NINT(VAL(SALT, R, I, T))
            IB(I) = IA(I)
         ELSE IF (T .EQ. 2) THEN
            RA(I) = REAL(VAL(SALT, R, I, T))
            RB(I) = RA(I)
         ELSE
            DA(I) = VAL(SALT, R, I, T)
            DB(I) = DA(I)
         END IF
   10 CONTINUE
      END

C     compare the A buffer with EX; abort with a description on mismatch
      SUBROUTINE CMP(WHAT, T, O, N, ROOT, INPL)
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER MAXN
      PARAMETER (MAXN = 262147)
      INTEGER IA(MAXN), IB(MAXN)
      REAL RA(MAXN), RB(MAXN)
      DOUBLE PRECISION DA(MAXN), DB(MAXN), EX(MAXN)
      COMMON /CCBUF/ DA, DB, EX
      EQUIVALENCE (DA(1), RA(1), IA(1)), (DB(1), RB(1), IB(1))
      INTEGER NCASES, SALT, WRANK
      COMMON /CCSTAT/ NCASES, SALT, WRANK
      CHARACTER*32 CNAME
      COMMON /CCNAME/ CNAME
      CHARACTER*(*) WHAT
      CHARACTER*16 TN(3)
      CHARACTER*8 ON(4)
      INTEGER T, O, N, ROOT, INPL, I, IERR
      DOUBLE PRECISION G
      DATA TN /'INTEGER', 'REAL', 'DOUBLE PRECISION'/
      DATA ON /'MPI_SUM', 'MPI_MAX', 'MPI_MIN', '-'/
      DO 10 I = 1, N
         IF (T .EQ. 1) G = DBLE(IA(I))
         IF (T .EQ. 2) G = DBLE(RA(I))
         IF (T .EQ. 3) G = DA(I)
         IF (G .NE. EX(I)) THEN
            WRITE (0, 100) NCASES, WHAT, TN(T)(1:LEN_TRIM(TN(T))),
     &           ON(O)(1:LEN_TRIM(ON(O))), N, ROOT, INPL,
     &           CNAME(1:LEN_TRIM(CNAME)), WRANK, I, G, EX(I)
            CALL MPI_ABORT(MPI_COMM_WORLD, 1, IERR)
         END IF
   10 CONTINUE
  100 FORMAT ('collcheck_f77: FAILED case ', I0, ': ', A, ' type=', A,
     &     ' op=', A, ' count=', I0, ' root=', I0, ' in_place=', I0,
     &     ' comm=', A, ' world rank ', I0, ': index ', I0, ' got ',
     &     G0, ' expected ', G0)
      END

      SUBROUTINE CHKERR(IERR, WHAT)
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER IERR, E
      CHARACTER*(*) WHAT
      INTEGER NCASES, SALT, WRANK
      COMMON /CCSTAT/ NCASES, SALT, WRANK
      IF (IERR .NE. MPI_SUCCESS) THEN
         WRITE (0, '(A,I0,3A,I0)') 'collcheck_f77: FAILED case ',
     &        NCASES, ': ', WHAT, ' returned error ', IERR
         CALL MPI_ABORT(MPI_COMM_WORLD, 1, E)
      END IF
      END

C     expected reduction over ranks 0..NP-1 into EX
      SUBROUTINE REDEX(T, O, N, NP)
      IMPLICIT NONE
      INTEGER MAXN
      PARAMETER (MAXN = 262147)
      INTEGER IA(MAXN), IB(MAXN)
      REAL RA(MAXN), RB(MAXN)
      DOUBLE PRECISION DA(MAXN), DB(MAXN), EX(MAXN)
      COMMON /CCBUF/ DA, DB, EX
      EQUIVALENCE (DA(1), RA(1), IA(1)), (DB(1), RB(1), IB(1))
      INTEGER NCASES, SALT, WRANK
      COMMON /CCSTAT/ NCASES, SALT, WRANK
      INTEGER T, O, N, NP, I, R
      DOUBLE PRECISION V, VAL
      DO 20 I = 1, N
         EX(I) = VAL(SALT, 0, I, T)
         DO 10 R = 1, NP - 1
            V = VAL(SALT, R, I, T)
            IF (O .EQ. 1) EX(I) = EX(I) + V
            IF (O .EQ. 2) EX(I) = MAX(EX(I), V)
            IF (O .EQ. 3) EX(I) = MIN(EX(I), V)
   10    CONTINUE
   20 CONTINUE
      END

C     MPI_BCAST from ROOT
      SUBROUTINE DOBC(COMM, T, N, ROOT)
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER MAXN
      PARAMETER (MAXN = 262147)
      INTEGER IA(MAXN), IB(MAXN)
      REAL RA(MAXN), RB(MAXN)
      DOUBLE PRECISION DA(MAXN), DB(MAXN), EX(MAXN)
      COMMON /CCBUF/ DA, DB, EX
      EQUIVALENCE (DA(1), RA(1), IA(1)), (DB(1), RB(1), IB(1))
      INTEGER NCASES, SALT, WRANK
      COMMON /CCSTAT/ NCASES, SALT, WRANK
      INTEGER COMM, T, N, ROOT, ME, IERR, I, MTYPE
      DOUBLE PRECISION VAL
      NCASES = NCASES + 1
      SALT = SALT + 1
      CALL MPI_COMM_RANK(COMM, ME, IERR)
      IF (ME .EQ. ROOT) THEN
         CALL FILL(T, ME, N)
      ELSE
         DO 10 I = 1, N
            IF (T .EQ. 1) IA(I) = -7
            IF (T .EQ. 2) RA(I) = -7.0
            IF (T .EQ. 3) DA(I) = -7D0
   10    CONTINUE
      END IF
      CALL MPI_BCAST(IA(1), N, MTYPE(T), ROOT, COMM, IERR)
      CALL CHKERR(IERR, 'MPI_BCAST')
      DO 20 I = 1, N
         EX(I) = VAL(SALT, ROOT, I, T)
   20 CONTINUE
      CALL CMP('MPI_BCAST', T, 4, N, ROOT, 0)
      END

C     MPI_ALLREDUCE, in place when INPL is 1
      SUBROUTINE DOALL(COMM, T, O, N, INPL)
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER MAXN
      PARAMETER (MAXN = 262147)
      INTEGER IA(MAXN), IB(MAXN)
      REAL RA(MAXN), RB(MAXN)
      DOUBLE PRECISION DA(MAXN), DB(MAXN), EX(MAXN)
      COMMON /CCBUF/ DA, DB, EX
      EQUIVALENCE (DA(1), RA(1), IA(1)), (DB(1), RB(1), IB(1))
      INTEGER NCASES, SALT, WRANK
      COMMON /CCSTAT/ NCASES, SALT, WRANK
      INTEGER COMM, T, O, N, INPL, ME, NP, IERR, MOP, MTYPE
      NCASES = NCASES + 1
      SALT = SALT + 1
      CALL MPI_COMM_RANK(COMM, ME, IERR)
      CALL MPI_COMM_SIZE(COMM, NP, IERR)
      CALL FILL(T, ME, N)
      IF (INPL .EQ. 1) THEN
         CALL MPI_ALLREDUCE(MPI_IN_PLACE, IA(1), N, MTYPE(T), MOP(O),
     &        COMM, IERR)
      ELSE
         CALL MPI_ALLREDUCE(IB(1), IA(1), N, MTYPE(T), MOP(O), COMM,
     &        IERR)
      END IF
      CALL CHKERR(IERR, 'MPI_ALLREDUCE')
      CALL REDEX(T, O, N, NP)
      CALL CMP('MPI_ALLREDUCE', T, O, N, -1, INPL)
      END

C     MPI_REDUCE to ROOT, in place at the root when INPL is 1
      SUBROUTINE DORED(COMM, T, O, N, ROOT, INPL)
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER MAXN
      PARAMETER (MAXN = 262147)
      INTEGER IA(MAXN), IB(MAXN)
      REAL RA(MAXN), RB(MAXN)
      DOUBLE PRECISION DA(MAXN), DB(MAXN), EX(MAXN)
      COMMON /CCBUF/ DA, DB, EX
      EQUIVALENCE (DA(1), RA(1), IA(1)), (DB(1), RB(1), IB(1))
      INTEGER NCASES, SALT, WRANK
      COMMON /CCSTAT/ NCASES, SALT, WRANK
      INTEGER COMM, T, O, N, ROOT, INPL, ME, NP, IERR, MOP, MTYPE
      NCASES = NCASES + 1
      SALT = SALT + 1
      CALL MPI_COMM_RANK(COMM, ME, IERR)
      CALL MPI_COMM_SIZE(COMM, NP, IERR)
      CALL FILL(T, ME, N)
      IF (INPL .EQ. 1 .AND. ME .EQ. ROOT) THEN
         CALL MPI_REDUCE(MPI_IN_PLACE, IA(1), N, MTYPE(T), MOP(O),
     &        ROOT, COMM, IERR)
      ELSE
         CALL MPI_REDUCE(IB(1), IA(1), N, MTYPE(T), MOP(O), ROOT,
     &        COMM, IERR)
      END IF
      CALL CHKERR(IERR, 'MPI_REDUCE')
      IF (ME .EQ. ROOT) THEN
         CALL REDEX(T, O, N, NP)
         CALL CMP('MPI_REDUCE', T, O, N, ROOT, INPL)
      END IF
      END
